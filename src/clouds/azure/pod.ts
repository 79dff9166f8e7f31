import { AZURE_CLOUDS, type AzureCloud } from './environments.ts';
import { CLOUDS } from '../registry.ts';
import { denial, type Denial, isDenial } from '../../errors.ts';
import type { EnvVar } from '../../kube/types.ts';
import { boundExpiration, parseSeconds, splitNames, tokenVolume, tolerated, windowsPath } from '../common.ts';
import type { Injection, PodContext, PodProvider } from '../types.ts';

/**
 * Conventions of Azure/azure-workload-identity. The token layout is the one of releases 0.8 to
 * 1.5, which images hard-coded; 1.6 moved it and broke them.
 */
export const AZURE_VOLUME_NAME = 'azure-identity-token';
export const AZURE_MOUNT_PATH = '/var/run/secrets/azure/tokens';
export const AZURE_TOKEN_FILE = 'azure-identity-token';
export const AZURE_USE_LABEL = 'azure.workload.identity/use';
/** The peer's own token volume from release 1.6 on: azure-workload-identity-reserved-<hash>. */
const AZURE_PEER_VOLUME_PREFIX = 'azure-workload-identity-reserved-';
const PREFIX = 'azure.workload.identity';
const KEYS = {
  clientId: `${PREFIX}/client-id`,
  tenantId: `${PREFIX}/tenant-id`,
  expiration: `${PREFIX}/service-account-token-expiration`,
  skipContainers: `${PREFIX}/skip-containers`,
};

export interface AzureOptions {
  /** Tenant for ServiceAccounts that do not name one. */
  tenantId: string | undefined;
  cloud: AzureCloud;
  audience: string;
  defaultTokenExpiration: number;
  /** Refuse the values the peer read its own way (see tolerated) instead of warning. */
  strict?: boolean;
}

export const GUID_PATTERN = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
// Entra accepts a tenant's verified domain in place of its id.
const TENANT_PATTERN =
  /^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[a-zA-Z0-9][a-zA-Z0-9.-]{0,252}\.[a-zA-Z]{2,})$/;

export function isTenantId(value: string): boolean {
  return TENANT_PATTERN.test(value);
}

export function createAzureProvider(options: AzureOptions): PodProvider {
  const authorityHost = AZURE_CLOUDS[options.cloud];
  return {
    name: 'azure',
    annotationPrefixes: [`${PREFIX}/`],
    resolvePod({ pod, serviceAccount, windows }: PodContext): Injection | Denial | undefined {
      // Opt-in by label, exactly "true", as in the peer.
      if (pod.metadata?.labels?.[AZURE_USE_LABEL] !== 'true') return undefined;
      // The peer (1.6 on) ran first, side by side during a migration: its token is there already.
      if (pod.spec?.volumes?.some((v) => v.name.startsWith(AZURE_PEER_VOLUME_PREFIX))) return undefined;
      const sa = serviceAccount?.annotations ?? {};
      const saName = serviceAccount
        ? `ServiceAccount ${serviceAccount.namespace}/${serviceAccount.name}`
        : 'ServiceAccount';
      const warnings: string[] = [];

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
      if (!clientId) warnings.push(`${saName} has no ${KEYS.clientId} annotation: AZURE_CLIENT_ID is not injected`);
      if (!tenantId)
        warnings.push(
          `no tenant: annotate the ServiceAccount with ${KEYS.tenantId} or start the webhook with --azure-tenant-id; AZURE_TENANT_ID is not injected`,
        );

      let expiration = options.defaultTokenExpiration;
      // The peer reads an empty annotation as no annotation (webhook.go getServiceAccountTokenExpiration).
      const blank = (raw: string | undefined, where: string) => {
        if (raw === undefined || raw.trim() !== '') return false;
        const problem = denial(
          'InvalidTokenExpiration',
          `${where} annotation ${KEYS.expiration}="${raw}" is empty; expected whole seconds from ${CLOUDS.azure.tokenBounds.min} to ${CLOUDS.azure.tokenBounds.max}, or no annotation`,
        );
        return tolerated(strict, warnings, problem, true, 'ignoring it');
      };
      const podBlank = blank(pod.metadata?.annotations?.[KEYS.expiration], 'Pod');
      if (typeof podBlank !== 'boolean') return podBlank;
      const saBlank = blank(sa[KEYS.expiration], saName);
      if (typeof saBlank !== 'boolean') return saBlank;
      const podExpiration = podBlank ? undefined : pod.metadata?.annotations?.[KEYS.expiration];
      const rawExpiration = podExpiration ?? (saBlank ? undefined : sa[KEYS.expiration]);
      if (rawExpiration !== undefined) {
        const where = podExpiration !== undefined ? 'Pod' : saName;
        const parsed = parseSeconds(rawExpiration, KEYS.expiration, where);
        if (typeof parsed !== 'number') return parsed;
        const bounded = boundExpiration(parsed, CLOUDS.azure.tokenBounds, KEYS.expiration, where);
        if (isDenial(bounded)) return bounded;
        expiration = bounded;
      }

      const tokenFile = `${AZURE_MOUNT_PATH}/${AZURE_TOKEN_FILE}`;
      // Empty values are never injected: an empty AZURE_CLIENT_ID breaks SDKs that would
      // otherwise read it from elsewhere.
      const envGroups: EnvVar[][] = [];
      if (clientId) envGroups.push([{ name: 'AZURE_CLIENT_ID', value: clientId }]);
      if (tenantId) envGroups.push([{ name: 'AZURE_TENANT_ID', value: tenantId }]);
      envGroups.push([{ name: 'AZURE_FEDERATED_TOKEN_FILE', value: windows ? windowsPath(tokenFile) : tokenFile }]);
      envGroups.push([{ name: 'AZURE_AUTHORITY_HOST', value: authorityHost }]);

      const identity: Record<string, string> = { cloud: options.cloud, audience: options.audience };
      if (clientId) identity.clientId = clientId;
      if (tenantId) identity.tenantId = tenantId;
      return {
        provider: 'azure',
        volume: tokenVolume(AZURE_VOLUME_NAME, options.audience, expiration, AZURE_TOKEN_FILE),
        mountPath: AZURE_MOUNT_PATH,
        envGroups,
        annotations: {},
        skipContainers: splitNames(pod.metadata?.annotations?.[KEYS.skipContainers], ';'),
        identity,
        warnings: warnings.length ? warnings : undefined,
      };
    },
  };
}
