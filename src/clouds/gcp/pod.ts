// Workload Identity Federation outside GKE, in the two dialects users already write:
// pfnet-research/gcp-workload-identity-federation-webhook (`cloud.google.com/...`) and
// Flux (`gcp.auth.fluxcd.io/workload-identity-provider` with GKE's `iam.gke.io/gcp-service-account`).
//
// Defaults follow the dialect the ServiceAccount is written in. The pfnet dialect gets pfnet's:
// audience sts.googleapis.com, "gcloud" mode (a setup init container logs gcloud in and writes the
// credential file into a gcloud-config emptyDir) unless injection-mode says "direct" (the file in
// its own downward-API volume at /var/run/secrets/workload-identity), files mode 0440. The Flux
// dialect gets Google's: the provider's own audience and the file inside the token's projected
// volume, with no init container and no extra object.
//
// This file reads one admission (service-account.ts holds the readers) and hands it to its layout
// (layouts.ts).
import { type AnnotationBound, scalarBound } from '../../annotation-bounds.ts';
import { MAX_AUDIENCE, MAX_NAME_LIST_ANNOTATION, MAX_SCALAR_ANNOTATION } from '../../bounds.ts';
import { type Denial, isDenial } from '../../errors.ts';
import type { EnvVar } from '../../kube/types.ts';
import { skippedContainers, windowsPath } from '../common.ts';
import type { Injection, PodContext, PodProvider } from '../types.ts';
import {
  envVar,
  GCP_CREDENTIAL_ENV,
  GCP_MOUNT_PATH,
  GCP_TOKEN_FILE,
  GCP_KEYS,
  RUN_AS_USER_ANNOTATION,
} from './conventions.ts';
import { projectOfEmail, type WorkloadIdentityProvider } from './external-account.ts';
import { PFNET } from './facts.ts';
import { type GcpPod, pfnetDirect, pfnetGcloud, projectedLayout } from './layouts.ts';
import type { GcpOptions } from './options.ts';
import { PROJECT_ID_ANNOTATION, projectIdOf } from './project-id.ts';
import { readAudience, readExpiration, readLayout, readNamed } from './service-account.ts';

const PFNET_PROJECT = /@(.*).iam.gserviceaccount.com/;

/**
 * The ServiceAccount annotations both dialects read, each with the most a legitimate value
 * needs: a provider name or audience (about 170 characters in full), an email (254) and short values.
 */
const GCP_SERVICE_ACCOUNT_ANNOTATIONS: readonly AnnotationBound[] = [
  ...GCP_KEYS.provider.map((key) => scalarBound(key, MAX_AUDIENCE)),
  ...GCP_KEYS.email.map((key) => scalarBound(key)),
  scalarBound(GCP_KEYS.audience, MAX_AUDIENCE),
  scalarBound(GCP_KEYS.expiration),
  scalarBound(GCP_KEYS.injectionMode),
  scalarBound(RUN_AS_USER_ANNOTATION),
  scalarBound(PROJECT_ID_ANNOTATION),
];

export function createGcpProvider(options: GcpOptions): PodProvider {
  return {
    name: 'gcp',
    serviceAccountAnnotations: GCP_SERVICE_ACCOUNT_ANNOTATIONS,
    podReads: {
      annotations: [
        { key: GCP_KEYS.expiration, max: MAX_SCALAR_ANNOTATION },
        { key: GCP_KEYS.skipContainers, max: MAX_NAME_LIST_ANNOTATION, separator: ',' },
        { key: GCP_KEYS.includeContainers, max: MAX_NAME_LIST_ANNOTATION, separator: ',' },
      ],
      credentialEnv: GCP_CREDENTIAL_ENV,
    },
    podSelection: {
      containers: { skip: GCP_KEYS.skipContainers, include: GCP_KEYS.includeContainers, separator: ',' },
    },
    resolvePod: (ctx) => resolveGcpPod(options, ctx),
  };
}

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
  const expiration = readExpiration(options, pod.metadata?.annotations?.[GCP_KEYS.expiration], sa, saName);
  if (isDenial(expiration)) return expiration;
  const project = projectOf(sa, saName, email, pfnet);
  if (isDenial(project)) return project;

  // Windows paths for the Flux dialect; pfnet writes its Linux paths whatever the OS, and so do we
  // for its dialect (the kubelet mounts them under C:, which a rooted path names).
  const path = (p: string) => (windows && !pfnet ? windowsPath(p) : p);
  const g: GcpPod = {
    options,
    provider,
    email,
    audience,
    mode: layout.mode,
    expiration,
    project,
    identity: identityOf(provider, audience, email),
    skipContainers: skippedContainers(
      pod,
      { skip: GCP_KEYS.skipContainers, include: GCP_KEYS.includeContainers },
      ',',
      warnings,
    ),
    projectEnv: projectEnv(project),
    path,
    tokenFile: path(`${GCP_MOUNT_PATH}/${GCP_TOKEN_FILE}`),
    warnings: warnings.length ? warnings : undefined,
  };
  if (layout.layout === 'projected') return projectedLayout(g);
  return layout.layout === 'pfnet-direct' ? pfnetDirect(g) : pfnetGcloud(g, layout.runAsUser);
}

/**
 * The project the containers are told. The annotated project (pfnet PR #138) wins; else pfnet
 * takes the project from the first "@X.iam.gserviceaccount.com" in the email, "" when there is
 * none (webhooks/mutatepod.go: the same regular expression, unanchored).
 */
function projectOf(
  sa: Readonly<Record<string, string>>,
  saName: string,
  email: string | undefined,
  pfnet: boolean,
): string | Denial | undefined {
  const projectId = projectIdOf(sa, saName);
  if (isDenial(projectId)) return projectId;
  return projectId ?? (!email ? undefined : pfnet ? (PFNET_PROJECT.exec(email)?.[1] ?? '') : projectOfEmail(email));
}

/**
 * The project's variables. GOOGLE_CLOUD_PROJECT: the Google client libraries read it; without it
 * they probe the metadata server (seconds of retries off GCE) before asking Resource Manager.
 */
function projectEnv(project: string | undefined): EnvVar[][] {
  return project ? [[envVar('CLOUDSDK_CORE_PROJECT', project)], [envVar('GOOGLE_CLOUD_PROJECT', project)]] : [];
}

/** The identity tenant policy and the metrics see. */
function identityOf(provider: WorkloadIdentityProvider, audience: string, email: string | undefined) {
  const identity: Record<string, string> = {
    workloadIdentityProvider: provider.name,
    projectNumber: provider.projectNumber,
    pool: provider.pool,
    audience,
  };
  if (email) identity.serviceAccountEmail = email;
  return identity;
}
