// The AWS provider: which ServiceAccounts it serves and how, read from the annotations the peer
// (aws/amazon-eks-pod-identity-webhook) reads. EKS Pod Identity's container credentials are
// rendered here; IRSA in irsa.ts; what both read alike in pod-read.ts.
import { type AnnotationBound, listBound, scalarBound } from '../../annotation-bounds.ts';
import {
  MAX_AUDIENCE,
  MAX_DNS_LABEL,
  MAX_NAME_LIST_ANNOTATION,
  MAX_ROLE_ARN,
  MAX_SCALAR_ANNOTATION,
} from '../../bounds.ts';
import { type Denial, isDenial } from '../../errors.ts';
import { serviceAccountNameOf } from '../../model.ts';
import { skippedContainers, tokenVolume, windowsPath } from '../common.ts';
import type { Injection, PodContext, PodProvider } from '../types.ts';
import {
  AWS_CREDENTIAL_ENV,
  AWS_POD_IDENTITY_LABEL,
  AWS_SKIP_POD_LABEL,
  containerCredentialsConfigured,
} from './conventions.ts';
import { irsa } from './irsa.ts';
import { type Aws, type AwsOptions, type ContainerCredentialsOptions, keysOf } from './options.ts';
import { type AwsPod, envPlan, readShared, withWarnings } from './pod-read.ts';
import { MAX_PROFILE_NAME } from './profiles.ts';

/**
 * The ServiceAccount annotations IRSA reads, under the configured prefix, each with the most a
 * legitimate value needs: a role ARN, 64 profiles of a name and a role ARN, an audience, and
 * short values (a boolean, seconds, a region, a session name).
 */
export function awsServiceAccountAnnotations(prefix: string): AnnotationBound[] {
  const k = keysOf(prefix);
  return [
    scalarBound(k.roleArn, MAX_ROLE_ARN),
    listBound(k.roleArns, MAX_PROFILE_NAME + 1 + MAX_ROLE_ARN),
    listBound(k.containerProfiles, MAX_DNS_LABEL + 1 + MAX_PROFILE_NAME),
    listBound(k.sourceProfiles, MAX_PROFILE_NAME + 1 + MAX_PROFILE_NAME),
    scalarBound(k.audience, MAX_AUDIENCE),
    scalarBound(k.regional),
    scalarBound(k.expiration),
    scalarBound(k.region),
    scalarBound(k.sessionName),
  ];
}

export function createAwsProvider(options: AwsOptions): PodProvider {
  const aws: Aws = { options, keys: keysOf(options.annotationPrefix), strict: options.strict ?? false };
  const { expiration, region, skipContainers, includeContainers, sessionName } = aws.keys;
  return {
    name: 'aws',
    serviceAccountAnnotations: awsServiceAccountAnnotations(options.annotationPrefix),
    podReads: {
      annotations: [
        { key: expiration, max: MAX_SCALAR_ANNOTATION },
        { key: region, max: MAX_SCALAR_ANNOTATION },
        { key: sessionName, max: MAX_SCALAR_ANNOTATION },
        { key: skipContainers, max: MAX_NAME_LIST_ANNOTATION, separator: ',' },
        { key: includeContainers, max: MAX_NAME_LIST_ANNOTATION, separator: ',' },
      ],
      credentialEnv: AWS_CREDENTIAL_ENV,
    },
    podSelection: {
      skipLabel: AWS_SKIP_POD_LABEL,
      containers: { skip: skipContainers, include: includeContainers, separator: ',' },
    },
    resolvePod: (ctx) => resolveAwsPod(aws, ctx),
  };
}

function resolveAwsPod(
  aws: Aws,
  { pod, namespace, serviceAccount, windows }: PodContext,
): Injection | Denial | undefined {
  const labels = pod.metadata?.labels;
  if (labels && labels[AWS_SKIP_POD_LABEL] !== undefined) return undefined;
  const name = serviceAccount?.name ?? serviceAccountNameOf(pod);
  const warnings: string[] = [];
  const { skipContainers: skip, includeContainers: include } = aws.keys;
  const ctx: AwsPod = {
    aws,
    pod,
    sa: serviceAccount?.annotations ?? {},
    saName: `ServiceAccount ${namespace}/${name}`,
    skip: skippedContainers(pod, { skip, include }, ',', warnings),
    path: (file) => (windows ? windowsPath(file) : file),
    warnings,
  };
  // EKS Pod Identity takes precedence over IRSA and needs no annotation: the association lives
  // in EKS (the peer's buildPodPatchConfig).
  const cc = aws.options.containerCredentials;
  if (cc?.associations.has(namespace, name)) return podIdentity(ctx, cc);
  if (!serviceAccount) return undefined;
  return irsa(ctx);
}

/**
 * EKS Pod Identity's container credentials. The ServiceAccount's annotations, when known, still
 * give the expiry and regional STS, as the peer's GetCommonConfigurations does.
 */
function podIdentity(ctx: AwsPod, cc: ContainerCredentialsOptions): Injection | Denial {
  const shared = readShared(ctx);
  if (isDenial(shared)) return shared;
  const tokenFile = `${cc.mountPath.replace(/\/$/, '')}/${cc.tokenPath}`;
  const pair = [
    { name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI', value: cc.fullUri },
    { name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', value: ctx.path(tokenFile) },
  ];
  return withWarnings(ctx.warnings, {
    provider: 'aws',
    volume: tokenVolume(cc.volumeName, cc.audience, shared.expiration, cc.tokenPath),
    mountPath: cc.mountPath,
    ...envPlan(ctx, shared, pair),
    annotations: {},
    labels: { [AWS_POD_IDENTITY_LABEL]: 'enabled' },
    skipContainers: ctx.skip,
    configuredBy: containerCredentialsConfigured,
    credentialEnv: AWS_CREDENTIAL_ENV,
    identity: { mode: 'eks-pod-identity', audience: cc.audience },
  });
}
