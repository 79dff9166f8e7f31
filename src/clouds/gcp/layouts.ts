// The three layouts a GCP injection takes: the Flux dialect's, as Google lays it out (the
// credential file in the token's projected volume), and pfnet's direct and gcloud modes. Each
// renders one admission's reading (GcpPod) as the injection the core plans.
import type { DownwardAPIFile, EnvVar, Volume, VolumeMount } from '../../kube/types.ts';
import { tokenVolume } from '../common.ts';
import type { Injection } from '../types.ts';
import {
  envVar,
  GCP_CREDENTIAL_ENV,
  GCP_CREDENTIALS_ANNOTATION,
  GCP_CREDENTIALS_FILE,
  GCP_MOUNT_PATH,
  GCP_TOKEN_FILE,
  GCP_VOLUME_NAME,
  GCP_KEYS,
} from './conventions.ts';
import { externalAccountConfig, type WorkloadIdentityProvider } from './external-account.ts';
import { PFNET } from './facts.ts';
import { gcloudSetupContainer, PFNET_SETUP_SCRIPT } from './gcloud-setup.ts';
import type { GcpOptions } from './options.ts';
import type { InjectionMode } from './service-account.ts';

/** What every layout renders: the ServiceAccount's identity as read, and the Pod's side of it. */
export interface GcpPod {
  options: GcpOptions;
  provider: WorkloadIdentityProvider;
  email: string | undefined;
  audience: string;
  mode: InjectionMode | undefined;
  expiration: number;
  /** The project the containers are told; '' where pfnet writes it empty. */
  project: string | undefined;
  identity: Record<string, string>;
  skipContainers: ReadonlySet<string>;
  projectEnv: EnvVar[][];
  path: (p: string) => string;
  tokenFile: string;
  warnings: string[] | undefined;
}

/** GOOGLE_CLOUD_PROJECT only where the container names no project of its own for gcloud either. */
const PROJECT_GUARD = { GOOGLE_CLOUD_PROJECT: ['CLOUDSDK_CORE_PROJECT'] } as const;

/** pfnet's writable gcloud config folder, an emptyDir every served container mounts. */
function configVolume(): { volume: Volume; mount: VolumeMount } {
  return {
    volume: { name: PFNET.configVolume, emptyDir: {} },
    mount: { name: PFNET.configVolume, mountPath: PFNET.configMountPath },
  };
}

/** The credential file, projected from the Pod annotation the webhook writes it into. */
function credentialsItem(): DownwardAPIFile {
  return {
    path: GCP_CREDENTIALS_FILE,
    fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${GCP_CREDENTIALS_ANNOTATION}']` },
  };
}

/** What every layout's injection starts with. */
function gcpBase(volume: Volume) {
  return {
    provider: 'gcp' as const,
    credentialEnv: GCP_CREDENTIAL_ENV,
    envGuards: PROJECT_GUARD,
    volume,
    mountPath: GCP_MOUNT_PATH,
  };
}

/** The Flux dialect, as Google lays it out: the credential file in the token's projected volume. */
export function projectedLayout(g: GcpPod): Injection {
  const { options, provider, email, path, tokenFile } = g;
  const credentialsFile = path(`${GCP_MOUNT_PATH}/${GCP_CREDENTIALS_FILE}`);
  const credentials = JSON.stringify(externalAccountConfig({ provider, serviceAccountEmail: email, tokenFile }));
  const envGroups: EnvVar[][] = [[{ name: 'GOOGLE_APPLICATION_CREDENTIALS', value: credentialsFile }]];
  // gcloud reads its own setting, not GOOGLE_APPLICATION_CREDENTIALS.
  if (g.mode === 'gcloud') envGroups.push([{ name: 'CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE', value: credentialsFile }]);
  envGroups.push(...g.projectEnv);
  if (options.region) envGroups.push([envVar('CLOUDSDK_COMPUTE_REGION', options.region)]);
  return {
    ...gcpBase(tokenVolume(GCP_VOLUME_NAME, g.audience, g.expiration, GCP_TOKEN_FILE, [credentialsItem()])),
    envGroups,
    annotations: { [GCP_CREDENTIALS_ANNOTATION]: credentials },
    skipContainers: g.skipContainers,
    identity: g.identity,
    warnings: g.warnings,
  };
}

/**
 * What pfnet's two modes share (webhooks/mutatepod.go, mutatepod_parts.go): the token volume in
 * its file mode, the identity recorded on the Pod (tools that read these keep working), and the
 * region and project variables.
 */
function pfnetParts(g: GcpPod): { volume: Volume; annotations: Record<string, string>; tail: EnvVar[][] } {
  const volume = tokenVolume(GCP_VOLUME_NAME, g.audience, g.expiration, GCP_TOKEN_FILE);
  volume.projected = {
    ...volume.projected,
    sources: volume.projected?.sources ?? [],
    defaultMode: g.options.fileMode ?? PFNET.fileMode,
  };
  const annotations: Record<string, string> = {
    [GCP_KEYS.provider[0]]: g.provider.name,
    ...(g.email ? { [GCP_KEYS.email[0]]: g.email } : {}),
    [GCP_KEYS.audience]: g.audience,
    [GCP_KEYS.expiration]: String(g.expiration),
  };
  const region = g.options.region ?? PFNET.region;
  // Both always, as pfnet adds them (empty values included) where the container sets neither name.
  const tail: EnvVar[][] = [
    [envVar('CLOUDSDK_COMPUTE_REGION', region)],
    ...(g.project === '' ? [[{ name: 'CLOUDSDK_CORE_PROJECT', value: '' }]] : g.projectEnv),
  ];
  return { volume, annotations, tail };
}

/** pfnet's direct mode: the credential file in a downward-API volume of its own. */
export function pfnetDirect(g: GcpPod): Injection {
  const { options, path } = g;
  const { volume, annotations, tail } = pfnetParts(g);
  const credentialsFile = path(`${PFNET.directMountPath}/${GCP_CREDENTIALS_FILE}`);
  annotations[GCP_CREDENTIALS_ANNOTATION] = JSON.stringify(
    externalAccountConfig({ provider: g.provider, serviceAccountEmail: g.email, tokenFile: g.tokenFile }),
  );
  // pfnet's main (PR #152): gcloud reads the same file through its own variable, and needs a
  // writable config folder.
  const gcloud = options.directGcloud
    ? {
        volumes: [configVolume()],
        env: [
          [{ name: 'CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE', value: credentialsFile }],
          [{ name: 'CLOUDSDK_CONFIG', value: path(PFNET.configMountPath) }],
        ],
      }
    : { volumes: [], env: [] };
  const fileMode = options.fileMode ?? PFNET.fileMode;
  return {
    ...gcpBase(volume),
    extraVolumes: [
      ...gcloud.volumes,
      {
        volume: { name: PFNET.directVolume, downwardAPI: { items: [credentialsItem()], defaultMode: fileMode } },
        mount: { name: PFNET.directVolume, mountPath: PFNET.directMountPath, readOnly: true },
      },
    ],
    envGroups: [[{ name: 'GOOGLE_APPLICATION_CREDENTIALS', value: credentialsFile }], ...gcloud.env, ...tail],
    annotations,
    skipContainers: g.skipContainers,
    identity: g.identity,
    warnings: g.warnings,
  };
}

/** pfnet's gcloud mode: a setup init container writes the credential file and logs gcloud in. */
export function pfnetGcloud(g: GcpPod, runAsUser: number | undefined): Injection {
  const { options, path, email } = g;
  // readLayout chooses this layout only for a ServiceAccount that names its Google service account.
  if (email === undefined) throw new Error('the pfnet gcloud layout without a Google service account email');
  const { volume, annotations, tail } = pfnetParts(g);
  const setup = gcloudSetupContainer(
    g.provider.name,
    email,
    g.project,
    options.gcloudImage ?? PFNET.gcloudImage,
    runAsUser,
    options.setupResources,
  );
  return {
    ...gcpBase(volume),
    extraVolumes: [configVolume()],
    envGroups: [
      [{ name: 'GOOGLE_APPLICATION_CREDENTIALS', value: path(`${PFNET.configMountPath}/${GCP_CREDENTIALS_FILE}`) }],
      [{ name: 'CLOUDSDK_CONFIG', value: path(PFNET.configMountPath) }],
      ...tail,
    ],
    annotations,
    skipContainers: new Set([...g.skipContainers, PFNET.setupContainer]),
    initContainer: setup,
    // pfnet's own container, where its webhook came first: harmless with the values admitted here
    // (each within its character set), and refusing it would stop a migration with both installed.
    initContainerAlike: [['sh', '-c', PFNET_SETUP_SCRIPT]],
    identity: g.identity,
    warnings: g.warnings,
  };
}
