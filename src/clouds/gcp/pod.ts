import { type AnnotationBound, scalarBound } from '../../annotation-bounds.ts';
import { MAX_AUDIENCE, MAX_NAME_LIST_ANNOTATION, MAX_SCALAR_ANNOTATION } from '../../bounds.ts';
import { CLOUDS } from '../registry.ts';
import { AUDIENCE, PFNET, PROJECT_ID_PART } from './facts.ts';
import { denial, type Denial, isDenial } from '../../errors.ts';
import { kubeletLiteral, shellVariable } from '../../shell.ts';
import type { Container, DownwardAPIFile, EnvVar, Volume, VolumeMount } from '../../kube/types.ts';
import { boundExpiration, parseSeconds, skippedContainers, tokenVolume, tolerated, windowsPath } from '../common.ts';
import type { Injection, PodContext, PodProvider } from '../types.ts';
import { PROJECT_ID_ANNOTATION, projectIdOf } from './project-id.ts';

/**
 * Workload Identity Federation outside GKE, in the two dialects users already write:
 * pfnet-research/gcp-workload-identity-federation-webhook (`cloud.google.com/...`) and
 * Flux (`gcp.auth.fluxcd.io/workload-identity-provider` with GKE's `iam.gke.io/gcp-service-account`).
 *
 * Defaults follow the dialect the ServiceAccount is written in. The pfnet dialect gets pfnet's:
 * audience sts.googleapis.com, "gcloud" mode (a setup init container logs gcloud in and writes the
 * credential file into a gcloud-config emptyDir) unless injection-mode says "direct" (the file in
 * its own downward-API volume at /var/run/secrets/workload-identity), files mode 0440. The Flux
 * dialect gets Google's: the provider's own audience and the file inside the token's projected
 * volume, with no init container and no extra object.
 */
export const GCP_VOLUME_NAME = 'gcp-iam-token';
export const GCP_MOUNT_PATH = '/var/run/secrets/sts.googleapis.com/serviceaccount';
export const GCP_TOKEN_FILE = 'token';
export const GCP_CREDENTIALS_FILE = 'federation.json';
export const GCP_CREDENTIALS_ANNOTATION = 'cloud.google.com/external-credentials-json';

const KEYS = {
  provider: ['cloud.google.com/workload-identity-provider', 'gcp.auth.fluxcd.io/workload-identity-provider'],
  email: ['cloud.google.com/service-account-email', 'iam.gke.io/gcp-service-account'],
  audience: 'cloud.google.com/audience',
  expiration: 'cloud.google.com/token-expiration',
  injectionMode: 'cloud.google.com/injection-mode',
  skipContainers: 'cloud.google.com/skip-containers',
  includeContainers: 'cloud.google.com/include-containers',
} as const;
const RUN_AS_USER_ANNOTATION = 'cloud.google.com/gcloud-run-as-user';

export const PROVIDER_PATTERN =
  /^projects\/(\d{1,20})\/locations\/global\/workloadIdentityPools\/([a-z0-9-]{4,32})\/providers\/([a-z0-9-]{4,32})$/;
const PROVIDER_FORM = 'projects/<project number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>';
export const EMAIL_PATTERN = /^[a-zA-Z0-9._%+-]+@([a-zA-Z0-9.-]+)$/;
const SA_DOMAIN = new RegExp(`^(${PROJECT_ID_PART})\\.iam\\.gserviceaccount\\.com$`);
const PFNET_PROJECT = /@(.*).iam.gserviceaccount.com/;

export interface GcpOptions {
  defaultTokenExpiration: number;
  /** CLOUDSDK_COMPUTE_REGION for containers that do not set it. */
  region: string | undefined;
  /** Projected token audience when the ServiceAccount names none; default: the dialect's. */
  audience: string | undefined;
  /** Image of the pfnet dialect's gcloud setup init container (pfnet's -gcloud-image). */
  gcloudImage?: string;
  /** File mode of the pfnet dialect's token and credential volumes (pfnet's -token-default-mode). */
  fileMode?: number;
  /** Resources of the gcloud setup init container (pfnet's -setup-container-resources). */
  setupResources?: Record<string, unknown>;
  /** Refuse the values the peer read its own way (see tolerated) instead of warning. */
  strict?: boolean;
  /** pfnet dialect: the mode when the ServiceAccount names none and has an email (v0.7.0: gcloud). */
  defaultInjectionMode?: 'gcloud' | 'direct';
  /** pfnet dialect, direct mode: gcloud's variables and config volume too (pfnet's main, PR #152). */
  directGcloud?: boolean;
}

export interface WorkloadIdentityProvider {
  /** `projects/N/locations/global/workloadIdentityPools/P/providers/X` */
  name: string;
  projectNumber: string;
  pool: string;
  provider: string;
}

export function parseWorkloadIdentityProvider(value: string, where: string): WorkloadIdentityProvider | Denial {
  // The audience form (//iam.googleapis.com/projects/...) is accepted too: users paste it.
  const name = value.trim().replace(/^(?:https:)?\/\/iam\.googleapis\.com\//, '');
  const match = PROVIDER_PATTERN.exec(name);
  if (!match)
    return denial(
      'InvalidWorkloadIdentityProvider',
      `${where}="${value}" is not a workload identity provider; expected ${PROVIDER_FORM}`,
    );
  return { name, projectNumber: match[1], pool: match[2], provider: match[3] };
}

/** The project of a Google service account email (`name@PROJECT.iam.gserviceaccount.com`), if any. */
export function projectOfEmail(email: string): string | undefined {
  const domain = EMAIL_PATTERN.exec(email)?.[1];
  return domain ? SA_DOMAIN.exec(domain)?.[1] : undefined;
}

export interface ExternalAccountInput {
  provider: WorkloadIdentityProvider;
  /** Google service account to impersonate; undefined for direct resource access. */
  serviceAccountEmail: string | undefined;
  tokenFile: string;
}

/**
 * The `external_account` file exactly as `gcloud iam workload-identity-pools create-cred-config`
 * writes it, key order included.
 */
export function externalAccountConfig({
  provider,
  serviceAccountEmail,
  tokenFile,
}: ExternalAccountInput): Record<string, unknown> {
  const config: Record<string, unknown> = {
    universe_domain: 'googleapis.com',
    type: 'external_account',
    audience: `//iam.googleapis.com/${provider.name}`,
    subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
    token_url: 'https://sts.googleapis.com/v1/token',
  };
  if (serviceAccountEmail) {
    config.service_account_impersonation_url = `https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${serviceAccountEmail}:generateAccessToken`;
  }
  config.credential_source = { file: tokenFile, format: { type: 'text' } };
  if (!serviceAccountEmail) config.token_info_url = 'https://sts.googleapis.com/v1/introspect';
  return config;
}

/** Reads one of two dialect keys; both set to different values is a conflict, not a guess. */
function dialectValue(
  annotations: Readonly<Record<string, string>>,
  keys: readonly [string, string],
  saName: string,
): [key: string, value: string] | Denial | undefined {
  const a = annotations[keys[0]]?.trim();
  const b = annotations[keys[1]]?.trim();
  if (a && b && a !== b) {
    return denial('ConflictingAnnotations', `${saName} sets both ${keys[0]}="${a}" and ${keys[1]}="${b}"; keep one`);
  }
  if (a) return [keys[0], a];
  if (b) return [keys[1], b];
  return undefined;
}

/**
 * pfnet's setup script, byte for byte (its heredoc.Docf output): recognised in a Pod pfnet's
 * webhook served first, never written.
 */
export const PFNET_SETUP_SCRIPT = [
  'gcloud iam workload-identity-pools create-cred-config \\',
  '  $(GCP_WORKLOAD_IDENTITY_PROVIDER) \\',
  '  --service-account=$(GCP_SERVICE_ACCOUNT) \\',
  `  --output-file=$(CLOUDSDK_CONFIG)/${GCP_CREDENTIALS_FILE} \\`,
  `  --credential-source-file=${GCP_MOUNT_PATH}/${GCP_TOKEN_FILE}`,
  `gcloud auth login --cred-file=$(CLOUDSDK_CONFIG)/${GCP_CREDENTIALS_FILE}`,
  '',
].join('\n');

const CREDENTIALS_PATH = `${shellVariable('CLOUDSDK_CONFIG')}/${GCP_CREDENTIALS_FILE}`;

/**
 * The setup script: pfnet's commands with one change. pfnet writes `$(GCP_WORKLOAD_IDENTITY_PROVIDER)`,
 * which the kubelet replaces with the value before `sh` reads the script, so a value was shell
 * syntax (`...providers/x;id>F;#` ran `id`). Here the shell reads each value from the container's
 * environment as one quoted word, and every $ is escaped for the kubelet (src/shell.ts): the script
 * `sh` runs is this text, whatever the annotations hold.
 */
export const GCLOUD_SETUP_SCRIPT = kubeletLiteral(
  [
    'gcloud iam workload-identity-pools create-cred-config \\',
    `  ${shellVariable('GCP_WORKLOAD_IDENTITY_PROVIDER')} \\`,
    `  --service-account=${shellVariable('GCP_SERVICE_ACCOUNT')} \\`,
    `  --output-file=${CREDENTIALS_PATH} \\`,
    `  --credential-source-file=${GCP_MOUNT_PATH}/${GCP_TOKEN_FILE}`,
    `gcloud auth login --cred-file=${CREDENTIALS_PATH}`,
    '',
  ].join('\n'),
);

/** A variable whose value comes from an annotation, a flag or tenant policy: a kubelet literal. */
const envVar = (name: string, value: string): EnvVar => ({ name, value: kubeletLiteral(value) });

/**
 * pfnet's gcloud setup init container (mutatepod_parts.go gcloudSetupContainer, same arguments):
 * it writes the credential file and logs gcloud in. Runs under the Restricted Pod Security
 * Standard, as pfnet's does.
 */
export function gcloudSetupContainer(
  workloadIdentityProvider: string,
  serviceAccountEmail: string,
  project: string | undefined,
  image: string,
  runAsUser: number | undefined,
  resources: Record<string, unknown> | undefined,
): Container {
  const setup: Container = {
    name: PFNET.setupContainer,
    image,
    command: ['sh', '-c', GCLOUD_SETUP_SCRIPT],
    volumeMounts: [
      { name: GCP_VOLUME_NAME, mountPath: GCP_MOUNT_PATH, readOnly: true },
      { name: PFNET.configVolume, mountPath: PFNET.configMountPath },
    ],
    env: [
      envVar('GCP_WORKLOAD_IDENTITY_PROVIDER', workloadIdentityProvider),
      envVar('GCP_SERVICE_ACCOUNT', serviceAccountEmail),
      { name: 'CLOUDSDK_CONFIG', value: PFNET.configMountPath },
      // Empty when the email names no project, as pfnet writes it (projectEnvVar).
      envVar('CLOUDSDK_CORE_PROJECT', project ?? ''),
    ],
    securityContext: {
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      ...(runAsUser !== undefined ? { runAsUser } : {}),
    },
  };
  if (resources) setup.resources = resources;
  return setup;
}

/** The variables that carry the identity: a container's own value of one means it is not used. */
export const GCP_CREDENTIAL_ENV: ReadonlySet<string> = new Set([
  'GOOGLE_APPLICATION_CREDENTIALS',
  'CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE',
  'CLOUDSDK_CONFIG',
]);

/** GOOGLE_CLOUD_PROJECT only where the container names no project of its own for gcloud either. */
const PROJECT_GUARD = { GOOGLE_CLOUD_PROJECT: ['CLOUDSDK_CORE_PROJECT'] } as const;

/** pfnet's writable gcloud config folder, an emptyDir every served container mounts. */
function configVolume(): { volume: Volume; mount: VolumeMount } {
  return {
    volume: { name: PFNET.configVolume, emptyDir: {} },
    mount: { name: PFNET.configVolume, mountPath: PFNET.configMountPath },
  };
}

/**
 * The ServiceAccount annotations both dialects read, each with the most a legitimate value
 * needs: a provider name or audience (about 170 characters in full), an email (254) and short values.
 */
const GCP_SERVICE_ACCOUNT_ANNOTATIONS: readonly AnnotationBound[] = [
  ...KEYS.provider.map((key) => scalarBound(key, MAX_AUDIENCE)),
  ...KEYS.email.map((key) => scalarBound(key)),
  scalarBound(KEYS.audience, MAX_AUDIENCE),
  scalarBound(KEYS.expiration),
  scalarBound(KEYS.injectionMode),
  scalarBound(RUN_AS_USER_ANNOTATION),
  scalarBound(PROJECT_ID_ANNOTATION),
];

export function createGcpProvider(options: GcpOptions): PodProvider {
  return {
    name: 'gcp',
    serviceAccountAnnotations: GCP_SERVICE_ACCOUNT_ANNOTATIONS,
    podReads: {
      annotations: [
        { key: KEYS.expiration, max: MAX_SCALAR_ANNOTATION },
        { key: KEYS.skipContainers, max: MAX_NAME_LIST_ANNOTATION, separator: ',' },
        { key: KEYS.includeContainers, max: MAX_NAME_LIST_ANNOTATION, separator: ',' },
      ],
      credentialEnv: GCP_CREDENTIAL_ENV,
    },
    podSelection: {
      containers: { skip: KEYS.skipContainers, include: KEYS.includeContainers, separator: ',' },
    },
    resolvePod: (ctx) => resolveGcpPod(options, ctx),
  };
}

/** What every layout renders: the ServiceAccount's identity as read, and the Pod's side of it. */
interface GcpPod {
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

type InjectionMode = 'direct' | 'gcloud';
type Layout = 'projected' | 'pfnet-gcloud' | 'pfnet-direct';

function resolveGcpPod(
  options: GcpOptions,
  { pod, serviceAccount, windows }: PodContext,
): Injection | Denial | undefined {
  if (!serviceAccount) return undefined;
  const sa = serviceAccount.annotations;
  const saName = `ServiceAccount ${serviceAccount.namespace}/${serviceAccount.name}`;
  const warnings: string[] = [];
  const named = readNamed(options, sa, saName, warnings);
  if (named === undefined || isDenial(named)) return named;
  const { provider, email, pfnet } = named;
  const audience = readAudience(options, sa, saName, pfnet ? PFNET.audience : `//iam.googleapis.com/${provider.name}`);
  if (isDenial(audience)) return audience;
  const layout = readLayout(options, sa, saName, named);
  if (isDenial(layout)) return layout;
  const expiration = readExpiration(options, pod.metadata?.annotations?.[KEYS.expiration], sa, saName);
  if (isDenial(expiration)) return expiration;

  // Windows paths for the Flux dialect; pfnet writes its Linux paths whatever the OS, and so do we
  // for its dialect (the kubelet mounts them under C:, which a rooted path names).
  const path = (p: string) => (windows && !pfnet ? windowsPath(p) : p);
  // The annotated project (pfnet PR #138) wins; else pfnet takes the project from the first
  // "@X.iam.gserviceaccount.com" in the email, "" when there is none (webhooks/mutatepod.go:
  // the same regular expression, unanchored).
  const projectId = projectIdOf(sa, saName);
  if (isDenial(projectId)) return projectId;
  const project =
    projectId ?? (!email ? undefined : pfnet ? (PFNET_PROJECT.exec(email)?.[1] ?? '') : projectOfEmail(email));
  const identity: Record<string, string> = {
    workloadIdentityProvider: provider.name,
    projectNumber: provider.projectNumber,
    pool: provider.pool,
    audience,
  };
  if (email) identity.serviceAccountEmail = email;
  const g: GcpPod = {
    options,
    provider,
    email,
    audience,
    mode: layout.mode,
    expiration,
    project,
    identity,
    skipContainers: skippedContainers(
      pod,
      { skip: KEYS.skipContainers, include: KEYS.includeContainers },
      ',',
      warnings,
    ),
    projectEnv: project
      ? // GOOGLE_CLOUD_PROJECT: the Google client libraries read it; without it they probe the
        // metadata server (seconds of retries off GCE) before asking Resource Manager.
        [[envVar('CLOUDSDK_CORE_PROJECT', project)], [envVar('GOOGLE_CLOUD_PROJECT', project)]]
      : [],
    path,
    tokenFile: path(`${GCP_MOUNT_PATH}/${GCP_TOKEN_FILE}`),
    warnings: warnings.length ? warnings : undefined,
  };
  if (layout.layout === 'projected') return projectedLayout(g);
  return layout.layout === 'pfnet-direct' ? pfnetDirect(g) : pfnetGcloud(g, layout.runAsUser);
}

// pfnet accepts any projects/.+/locations/.+/workloadIdentityPools/.+/providers/.+ name. Outside
// --strict such a name is passed through, but in every mode only within the characters of Google's
// resource names and the braces of the placeholders pfnet's own examples write
// (projects/{PROJECT_NUMBER}/...): the name reaches env values, a file and pfnet's setup script, so
// no shell, quote, glob or white-space character.
const PFNET_PROVIDER_FORM = /^projects\/.+\/locations\/.+\/workloadIdentityPools\/.+\/providers\/.+$/;
const LOOSE_PART = '[A-Za-z0-9_.:{}-]+';
const LOOSE_PROVIDER = new RegExp(
  `^projects/(${LOOSE_PART})/locations/${LOOSE_PART}/workloadIdentityPools/(${LOOSE_PART})/providers/(${LOOSE_PART})$`,
);
const LOOSE_CHARACTERS = 'letters, digits and "-_.:{}"';

/**
 * A provider name of pfnet's form that is not Google's: passed through with a warning outside
 * --strict; undefined when it is not even pfnet's form (the caller's denial stands). One with a
 * character outside LOOSE_CHARACTERS is refused in every mode.
 */
function looseProvider(
  value: string,
  key: string,
  saName: string,
  problem: Denial,
  strict: boolean,
  warnings: string[],
): WorkloadIdentityProvider | Denial | undefined {
  const loose = LOOSE_PROVIDER.exec(value);
  if (!loose) {
    if (!PFNET_PROVIDER_FORM.test(value)) return undefined;
    return denial(
      'InvalidWorkloadIdentityProvider',
      `${saName} annotation ${key}="${value}" holds a character no workload identity provider holds (only ${LOOSE_CHARACTERS} between the slashes), with or without --strict; expected ${PROVIDER_FORM}`,
    );
  }
  const accepted = tolerated(strict, warnings, problem, undefined, 'passing it through');
  if (accepted !== undefined) return accepted;
  return { name: value, projectNumber: loose[1], pool: loose[2], provider: loose[3] };
}

/** The provider and the Google service account the ServiceAccount names, in either dialect; pfnet's when its provider key names it. */
function readNamed(
  options: GcpOptions,
  sa: Readonly<Record<string, string>>,
  saName: string,
  warnings: string[],
): { provider: WorkloadIdentityProvider; email: string | undefined; pfnet: boolean } | Denial | undefined {
  const providerEntry = dialectValue(sa, KEYS.provider, saName);
  if (providerEntry === undefined || isDenial(providerEntry)) return providerEntry;
  const [key, value] = providerEntry;
  const pfnet = key === KEYS.provider[0];
  let provider = parseWorkloadIdentityProvider(value, `${saName} annotation ${key}`);
  if (isDenial(provider) && pfnet)
    provider = looseProvider(value.trim(), key, saName, provider, options.strict ?? false, warnings) ?? provider;
  if (isDenial(provider)) return provider;

  const emailEntry = dialectValue(sa, KEYS.email, saName);
  if (emailEntry !== undefined && isDenial(emailEntry)) return emailEntry;
  const email = emailEntry?.[1];
  if (email !== undefined && !EMAIL_PATTERN.test(email)) {
    return denial(
      'InvalidServiceAccountEmail',
      `${saName} annotation ${emailEntry![0]}="${email}" is not a Google service account email; expected NAME@PROJECT.iam.gserviceaccount.com`,
    );
  }
  return { provider, email, pfnet };
}

/** The ServiceAccount's audience over the flag's or tenant policy's over the dialect's, each of AUDIENCE's characters. */
function readAudience(
  options: GcpOptions,
  sa: Readonly<Record<string, string>>,
  saName: string,
  dialect: string,
): string | Denial {
  const raw = sa[KEYS.audience];
  const audience = raw?.trim() || options.audience || dialect;
  if (AUDIENCE.pattern.test(audience)) return audience;
  const what = raw?.trim()
    ? `${saName} annotation ${KEYS.audience}="${raw}"`
    : `the audience "${audience}" (--gcp-audience or tenant policy)`;
  return denial('InvalidAnnotation', `${what} is not an audience: ${AUDIENCE.what}, with or without --strict`);
}

/** runAsUser's bound: the API server refuses a user id above 2^31-1. */
const MAX_USER_ID = 2 ** 31 - 1;

/** Where the credential file goes: the Flux dialect's projected volume, or pfnet's two modes. */
function readLayout(
  options: GcpOptions,
  sa: Readonly<Record<string, string>>,
  saName: string,
  { email, pfnet }: { email: string | undefined; pfnet: boolean },
): { layout: Layout; mode: InjectionMode | undefined; runAsUser: number | undefined } | Denial {
  // Case-insensitive, as pfnet's identityconfig.go reads it.
  const rawMode = sa[KEYS.injectionMode];
  const mode = rawMode?.trim().toLowerCase() || undefined;
  if (mode !== undefined && mode !== 'direct' && mode !== 'gcloud') {
    return denial(
      'InvalidAnnotation',
      `${saName} annotation ${KEYS.injectionMode}="${rawMode}" must be "direct" or "gcloud"`,
    );
  }
  // pfnet's gcloud mode needs the Google service account to log in as; without one the pfnet
  // peer refuses the ServiceAccount, and direct resource access needs no gcloud login.
  if (pfnet && mode === 'gcloud' && !email) {
    return denial(
      'InvalidAnnotation',
      `${saName} annotation ${KEYS.injectionMode}="gcloud" needs ${KEYS.email[0]}: gcloud logs in as that Google service account`,
    );
  }
  const layout = !pfnet
    ? 'projected'
    : (mode ?? (email ? (options.defaultInjectionMode ?? 'gcloud') : 'direct')) === 'gcloud'
      ? 'pfnet-gcloud'
      : 'pfnet-direct';
  const runAsUser = sa[RUN_AS_USER_ANNOTATION];
  if (runAsUser !== undefined && !/^\d{1,10}$/.test(runAsUser.trim())) {
    return denial(
      'InvalidAnnotation',
      `${saName} annotation cloud.google.com/gcloud-run-as-user="${runAsUser}" is not a user id; expected a whole number such as "1000"`,
    );
  }
  const userId = runAsUser !== undefined ? Number(runAsUser.trim()) : undefined;
  if (userId !== undefined && userId > MAX_USER_ID)
    return denial(
      'InvalidAnnotation',
      `${saName} annotation cloud.google.com/gcloud-run-as-user="${runAsUser}" is out of range; expected a user id from 0 to ${MAX_USER_ID} (the API server refuses a larger runAsUser)`,
    );
  return { layout, mode, runAsUser: userId };
}

/** The Pod's token expiry annotation over the ServiceAccount's over the flag, held to GCP's bounds. */
function readExpiration(
  options: GcpOptions,
  podExpiration: string | undefined,
  sa: Readonly<Record<string, string>>,
  saName: string,
): number | Denial {
  let expiration = options.defaultTokenExpiration;
  const rawExpiration = podExpiration ?? sa[KEYS.expiration];
  if (rawExpiration !== undefined) {
    const parsed = parseSeconds(rawExpiration, KEYS.expiration, podExpiration !== undefined ? 'Pod' : saName);
    if (typeof parsed !== 'number') return parsed;
    expiration = parsed;
  }
  return boundExpiration(expiration, CLOUDS.gcp.tokenBounds, KEYS.expiration, saName);
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
function projectedLayout(g: GcpPod): Injection {
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
  volume.projected!.defaultMode = g.options.fileMode ?? PFNET.fileMode;
  const annotations: Record<string, string> = {
    [KEYS.provider[0]]: g.provider.name,
    ...(g.email ? { [KEYS.email[0]]: g.email } : {}),
    [KEYS.audience]: g.audience,
    [KEYS.expiration]: String(g.expiration),
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
function pfnetDirect(g: GcpPod): Injection {
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
function pfnetGcloud(g: GcpPod, runAsUser: number | undefined): Injection {
  const { options, path } = g;
  const { volume, annotations, tail } = pfnetParts(g);
  const setup = gcloudSetupContainer(
    g.provider.name,
    g.email!,
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
