import { type AzureCloudName, type AzureStackEnvironment, authorityHostOf } from './environments.ts';
import { type AnnotationBound, listBound, scalarBound } from '../../annotation-bounds.ts';
import { CLOUDS } from '../registry.ts';
import { GUID_PATTERN, isTenantId } from './facts.ts';
import { denial, type Denial, isDenial } from '../../errors.ts';
import type { Container, EnvVar, Pod, VolumeMount } from '../../kube/types.ts';
import { boundExpiration, parseSeconds, skippedContainers, tokenVolume, tolerated } from '../common.ts';
import type { AddedContainer, Injection, PodContext, PodProvider, PodReads } from '../types.ts';
import { MAX_NAME_LIST_ANNOTATION, MAX_SCALAR_ANNOTATION } from '../../bounds.ts';
import {
  CONTAINER_CLIENT_IDS_ANNOTATION,
  containerEnvGroups,
  parseContainerClientIds,
} from './container-client-ids.ts';
import { kubeletLiteral } from '../../shell.ts';

/**
 * Conventions of Azure/azure-workload-identity. Its token moved in release 1.6, and images
 * hard-coded both places: the one volume is mounted at each, so the file is at
 * /var/run/secrets/azure/tokens/azure-identity-token (0.8 to 1.5, still in the peer's docs) and at
 * /var/run/secrets/azure/wi/token/azure-identity-token (1.6 on).
 */
const AZURE_VOLUME_NAME = 'azure-identity-token';
const AZURE_MOUNT_PATH = '/var/run/secrets/azure/tokens';
const AZURE_TOKEN_FILE = 'azure-identity-token';
/** Where the peer from 1.6 on has its file: `token/azure-identity-token` under /var/run/secrets/azure/wi. */
const AZURE_MOUNT_PATH_1_6 = '/var/run/secrets/azure/wi/token';
export const AZURE_USE_LABEL = 'azure.workload.identity/use';
/** The peer's own token volume from release 1.6 on: azure-workload-identity-reserved-<hash>. */
const AZURE_PEER_VOLUME_PREFIX = 'azure-workload-identity-reserved-';
const PREFIX = 'azure.workload.identity';
const KEYS = {
  clientId: `${PREFIX}/client-id`,
  tenantId: `${PREFIX}/tenant-id`,
  expiration: `${PREFIX}/service-account-token-expiration`,
  skipContainers: `${PREFIX}/skip-containers`,
  includeContainers: `${PREFIX}/include-containers`,
  injectProxy: `${PREFIX}/inject-proxy-sidecar`,
  proxyPort: `${PREFIX}/proxy-sidecar-port`,
};
const SKIP_KEYS = { skip: KEYS.skipContainers, include: KEYS.includeContainers };
/** The peer's proxy (pkg/webhook/consts.go): container names and default port. */
const PROXY_INIT_CONTAINER = 'azwi-proxy-init';
const PROXY_CONTAINER = 'azwi-proxy';
const DEFAULT_PROXY_PORT = 8000;

interface AzureProxyOptions {
  image: string;
  initImage: string;
  /** azwi-proxy as an init container with restartPolicy Always (Kubernetes 1.29+ sidecars). */
  nativeSidecar: boolean;
  logLevel: string;
}

export interface AzureOptions {
  /** Tenant for ServiceAccounts that do not name one. */
  tenantId: string | undefined;
  cloud: AzureCloudName;
  /** AzureStackCloud's environment file, read at start-up. */
  stack?: AzureStackEnvironment;
  proxy: AzureProxyOptions;
  audience: string;
  defaultTokenExpiration: number;
  /** Refuse the values the peer read its own way (see tolerated) instead of warning. */
  strict?: boolean;
}

/** The variables that carry the identity: a container's own value of one means it is not used. */
export const AZURE_CREDENTIAL_ENV: ReadonlySet<string> = new Set([
  'AZURE_CLIENT_ID',
  'AZURE_TENANT_ID',
  'AZURE_FEDERATED_TOKEN_FILE',
]);

/**
 * The ServiceAccount annotations the peer's and this webhook's Azure provider read, each with the
 * most a legitimate value needs: a GUID or a tenant's domain (253), seconds, and 64 entries of a
 * container name (63) and a GUID (36).
 */
const AZURE_SERVICE_ACCOUNT_ANNOTATIONS: readonly AnnotationBound[] = [
  scalarBound(KEYS.clientId),
  scalarBound(KEYS.tenantId),
  scalarBound(KEYS.expiration),
  listBound(CONTAINER_CLIENT_IDS_ANNOTATION, 63 + 1 + 36),
];

const AZURE_POD_READS: PodReads = {
  annotations: [
    { key: KEYS.expiration, max: MAX_SCALAR_ANNOTATION },
    { key: KEYS.injectProxy, max: MAX_SCALAR_ANNOTATION },
    { key: KEYS.proxyPort, max: MAX_SCALAR_ANNOTATION },
    { key: KEYS.skipContainers, max: MAX_NAME_LIST_ANNOTATION, separator: ';' },
    { key: KEYS.includeContainers, max: MAX_NAME_LIST_ANNOTATION, separator: ';' },
  ],
  credentialEnv: AZURE_CREDENTIAL_ENV,
};

export function createAzureProvider(options: AzureOptions): PodProvider {
  const authorityHost = authorityHostOf(options.cloud, options.stack);
  return {
    name: 'azure',
    serviceAccountAnnotations: AZURE_SERVICE_ACCOUNT_ANNOTATIONS,
    podReads: AZURE_POD_READS,
    podSelection: {
      requireLabel: { key: AZURE_USE_LABEL, value: 'true' },
      containers: { ...SKIP_KEYS, separator: ';' },
    },
    resolvePod: (ctx) => resolveAzurePod(options, authorityHost, ctx),
  };
}

function resolveAzurePod(
  options: AzureOptions,
  authorityHost: string,
  { pod, serviceAccount }: PodContext,
): Injection | Denial | undefined {
  // Opt-in by label, exactly "true", as in the peer.
  if (pod.metadata?.labels?.[AZURE_USE_LABEL] !== 'true') return undefined;
  // The peer (1.6 on) ran first, side by side during a migration: its token is there already.
  if (servedByPeer(pod)) return undefined;
  const sa = serviceAccount?.annotations ?? {};
  const saName = serviceAccount
    ? `ServiceAccount ${serviceAccount.namespace}/${serviceAccount.name}`
    : 'ServiceAccount';
  const warnings: string[] = [];
  const ids = readIds(options, sa, saName, warnings);
  if (isDenial(ids)) return ids;
  const expiration = readExpiration(options, pod, sa, saName, warnings);
  if (isDenial(expiration)) return expiration;
  const skipContainers = skippedContainers(pod, SKIP_KEYS, ';', warnings);
  const proxyPort = readProxy(pod, warnings);
  if (isDenial(proxyPort)) return proxyPort;
  return render(options, authorityHost, pod, { ...ids, expiration, proxyPort, skipContainers, warnings });
}

/** The ServiceAccount's client and tenant ids (the tenant's flag as fallback), and its per-container client ids. */
interface Ids {
  clientId: string;
  tenantId: string;
  perContainer: Map<string, string> | undefined;
}

function readIds(options: AzureOptions, sa: Record<string, string>, saName: string, warnings: string[]): Ids | Denial {
  // The peer injects any value as written; Entra will refuse it, so say so, and --strict refuses.
  const strict = options.strict ?? false;
  const clientId = sa[KEYS.clientId]?.trim() ?? '';
  if (clientId && !GUID_PATTERN.test(clientId)) {
    const problem = denial(
      'InvalidClientId',
      `${saName} annotation ${KEYS.clientId}="${clientId}" is not a client id; expected a GUID such as 00000000-0000-0000-0000-000000000000`,
    );
    const kept = tolerated(strict, warnings, problem, clientId, 'injecting it as written');
    if (typeof kept !== 'string') return kept;
  }
  const tenantAnnotation = sa[KEYS.tenantId]?.trim() ?? '';
  if (tenantAnnotation && !isTenantId(tenantAnnotation)) {
    const problem = denial(
      'InvalidTenantId',
      `${saName} annotation ${KEYS.tenantId}="${tenantAnnotation}" is not a tenant; expected a GUID or the tenant's domain`,
    );
    const kept = tolerated(strict, warnings, problem, tenantAnnotation, 'injecting it as written');
    if (typeof kept !== 'string') return kept;
  }
  const tenantId = tenantAnnotation || options.tenantId || '';
  const perContainer = sa[CONTAINER_CLIENT_IDS_ANNOTATION]?.trim()
    ? parseContainerClientIds(sa[CONTAINER_CLIENT_IDS_ANNOTATION], saName)
    : undefined;
  if (perContainer && isDenial(perContainer)) return perContainer;
  if (!clientId)
    warnings.push(
      `${saName} has no ${KEYS.clientId} annotation: AZURE_CLIENT_ID is not injected${perContainer ? ` but into the containers of ${CONTAINER_CLIENT_IDS_ANNOTATION}` : ''}`,
    );
  if (!tenantId)
    warnings.push(
      `no tenant: annotate the ServiceAccount with ${KEYS.tenantId} or start the webhook with --azure-tenant-id; AZURE_TENANT_ID is not injected`,
    );
  return { clientId, tenantId, perContainer };
}

/** The Pod's expiry annotation over the ServiceAccount's over the flag, held to Entra's bounds. */
function readExpiration(
  options: AzureOptions,
  pod: Pod,
  sa: Record<string, string>,
  saName: string,
  warnings: string[],
): number | Denial {
  // The peer reads an empty annotation as no annotation (webhook.go getServiceAccountTokenExpiration).
  const blank = (raw: string | undefined, where: string) => {
    if (raw === undefined || raw.trim() !== '') return false;
    const problem = denial(
      'InvalidTokenExpiration',
      `${where} annotation ${KEYS.expiration}="${raw}" is empty; expected whole seconds from ${CLOUDS.azure.tokenBounds.min} to ${CLOUDS.azure.tokenBounds.max}, or no annotation`,
    );
    return tolerated(options.strict ?? false, warnings, problem, true, 'ignoring it');
  };
  const podBlank = blank(pod.metadata?.annotations?.[KEYS.expiration], 'Pod');
  if (typeof podBlank !== 'boolean') return podBlank;
  const saBlank = blank(sa[KEYS.expiration], saName);
  if (typeof saBlank !== 'boolean') return saBlank;
  const podExpiration = podBlank ? undefined : pod.metadata?.annotations?.[KEYS.expiration];
  const rawExpiration = podExpiration ?? (saBlank ? undefined : sa[KEYS.expiration]);
  if (rawExpiration === undefined) return options.defaultTokenExpiration;
  const where = podExpiration !== undefined ? 'Pod' : saName;
  const parsed = parseSeconds(rawExpiration, KEYS.expiration, where);
  if (typeof parsed !== 'number') return parsed;
  return boundExpiration(parsed, CLOUDS.azure.tokenBounds, KEYS.expiration, where);
}

/** The proxy sidecar's port, if the Pod asks for the sidecar: the peer injects it whenever the annotation is there, whatever its value. */
function readProxy(pod: Pod, warnings: string[]): number | undefined | Denial {
  const annotations = pod.metadata?.annotations ?? {};
  const ask = annotations[KEYS.injectProxy];
  if (ask === undefined) return undefined;
  if (pod.spec?.hostNetwork === true)
    return denial(
      'ProxyWithHostNetwork',
      `Pod annotation ${KEYS.injectProxy}: the proxy sidecar cannot be injected into a Pod with hostNetwork: true (its iptables rules would redirect the node's traffic); remove the annotation or hostNetwork`,
    );
  const port = proxyPortOf(annotations[KEYS.proxyPort]);
  if (isDenial(port)) return port;
  if (ask.trim().toLowerCase() !== 'true')
    warnings.push(
      `Pod annotation ${KEYS.injectProxy}="${ask}" injects the proxy sidecar: the peer webhook injects it whenever the annotation is present, whatever its value; remove the annotation to go without`,
    );
  return port;
}

/** What the annotations say, read and checked. */
interface Read extends Ids {
  expiration: number;
  /** The proxy sidecar's port, when the Pod asks for it. */
  proxyPort: number | undefined;
  skipContainers: ReadonlySet<string>;
  warnings: string[];
}

/** The injection: the token mounted where each peer release looks, its variables, and the proxy if asked. */
function render(options: AzureOptions, authorityHost: string, pod: Pod, read: Read): Injection {
  const { clientId, tenantId, perContainer, proxyPort, skipContainers, warnings } = read;
  const tokenFile = `${AZURE_MOUNT_PATH}/${AZURE_TOKEN_FILE}`;
  // Empty values are never injected: an empty AZURE_CLIENT_ID breaks SDKs that would
  // otherwise read it from elsewhere.
  const envGroups: EnvVar[][] = [];
  // Outside --strict these may be any value the peer injected as written: kubelet literals, so a
  // $(NAME) in one is not expanded from the container's environment (src/shell.ts).
  if (clientId) envGroups.push([{ name: 'AZURE_CLIENT_ID', value: kubeletLiteral(clientId) }]);
  if (tenantId) envGroups.push([{ name: 'AZURE_TENANT_ID', value: kubeletLiteral(tenantId) }]);
  // Windows Pods too, as the peer writes it whatever the OS: the kubelet mounts the volume at
  // C:\var\run\secrets\..., which a rooted path names from the container's drive C:.
  envGroups.push([{ name: 'AZURE_FEDERATED_TOKEN_FILE', value: tokenFile }]);
  envGroups.push([{ name: 'AZURE_AUTHORITY_HOST', value: authorityHost }]);

  const identity: Record<string, string> = { cloud: options.cloud, audience: options.audience };
  if (clientId) identity.clientId = clientId;
  if (tenantId) identity.tenantId = tenantId;
  const mounts: VolumeMount[] = [AZURE_MOUNT_PATH, AZURE_MOUNT_PATH_1_6].map((mountPath) => ({
    name: AZURE_VOLUME_NAME,
    mountPath,
    readOnly: true,
  }));
  return {
    provider: 'azure',
    credentialEnv: AZURE_CREDENTIAL_ENV,
    volume: tokenVolume(AZURE_VOLUME_NAME, options.audience, read.expiration, AZURE_TOKEN_FILE),
    mountPath: AZURE_MOUNT_PATH,
    extraMountPaths: [AZURE_MOUNT_PATH_1_6],
    ...(proxyPort === undefined
      ? {}
      : { addedContainers: proxyContainers(options.proxy, proxyPort, skipContainers, envGroups.flat(), mounts) }),
    envGroups,
    ...(perContainer && {
      containerEnvGroups: containerEnvGroups(pod, perContainer, skipContainers, envGroups),
      // Each client id is an identity of its own: judged by tenant policy, trusted by its federated credential.
      additionalIdentities: [...new Set([...perContainer.values()].map((id) => id.toLowerCase()))]
        .filter((id) => id !== clientId.toLowerCase())
        .map((id) => ({ ...identity, clientId: id })),
    }),
    annotations: {},
    skipContainers,
    identity,
    warnings: warnings.length ? warnings : undefined,
  };
}

/**
 * The peer's own volume is mounted (or there is no container it would mount into): the peer served
 * this Pod. A volume of that name that containers do not mount is the user's (the peer would
 * overwrite it; this webhook leaves it and adds its own).
 */
function servedByPeer(pod: Pod): boolean {
  const names = new Set(
    (pod.spec?.volumes ?? []).filter((v) => v.name.startsWith(AZURE_PEER_VOLUME_PREFIX)).map((v) => v.name),
  );
  if (names.size === 0) return false;
  const skip = skippedContainers(pod, SKIP_KEYS, ';', []);
  const served = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].filter(
    (c) => !skip.has(c.name),
  );
  return served.length === 0 || served.some((c) => c.volumeMounts?.some((m) => names.has(m.name)));
}

function proxyPortOf(raw: string | undefined): number | Denial {
  if (raw === undefined) return DEFAULT_PROXY_PORT;
  const port = /^\+?\d{1,5}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(port >= 1 && port <= 65535))
    return denial(
      'InvalidProxyPort',
      `Pod annotation ${KEYS.proxyPort}="${raw}" is not a port; expected a whole number from 1 to 65535 (default ${DEFAULT_PROXY_PORT})`,
    );
  return port;
}

/**
 * The peer's proxy as it renders it (webhook.go injectProxyInitContainer and
 * injectProxySidecarContainer), each then given the identity like any container it does not skip.
 */
function proxyContainers(
  proxy: AzureProxyOptions,
  port: number,
  skip: ReadonlySet<string>,
  env: EnvVar[],
  mounts: VolumeMount[],
): AddedContainer[] {
  const withIdentity = (c: Container): Container => {
    if (skip.has(c.name)) return c;
    const have = new Set((c.env ?? []).map((e) => e.name));
    // Copies: each container's lists are its own once patched.
    const added = env.filter((e) => !have.has(e.name)).map((e) => ({ ...e }));
    return { ...c, env: [...(c.env ?? []), ...added], volumeMounts: mounts.map((m) => ({ ...m })) };
  };
  const init: Container = {
    name: PROXY_INIT_CONTAINER,
    image: proxy.initImage,
    imagePullPolicy: 'IfNotPresent',
    securityContext: {
      capabilities: { add: ['NET_ADMIN'], drop: ['ALL'] },
      privileged: true,
      runAsNonRoot: false,
      runAsUser: 0,
    },
    env: [{ name: 'PROXY_PORT', value: String(port) }],
  };
  const sidecar: Container = {
    name: PROXY_CONTAINER,
    image: proxy.image,
    imagePullPolicy: 'IfNotPresent',
    args: [`--proxy-port=${port}`, `--log-level=${proxy.logLevel}`],
    ports: [{ containerPort: port }],
    lifecycle: {
      postStart: {
        exec: { command: ['/proxy', `--proxy-port=${port}`, '--probe', `--log-level=${proxy.logLevel}`] },
      },
    },
    securityContext: {
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      privileged: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
    },
    ...(proxy.nativeSidecar ? { restartPolicy: 'Always' } : {}),
  };
  return [
    { list: 'initContainers', at: 'last', container: withIdentity(init) },
    {
      list: proxy.nativeSidecar ? 'initContainers' : 'containers',
      at: 'first',
      container: withIdentity(sidecar),
    },
  ];
}
