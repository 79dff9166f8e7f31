// Azure in tenant policy: an identity provider is an Entra tenant with its national cloud and
// authority host; a policy sees the tenant, the client id and the cloud. Only a tenant the
// ServiceAccount names is requested: any other is a default (computed, the one declared tenant,
// or --azure-tenant-id).
import { isDenial } from '../../errors.ts';
import type { CloudPolicy, Injection, PodProvider } from '../types.ts';
import { AZURE_CLOUDS, type AzureCloud } from './environments.ts';
import { isTenantId } from './facts.ts';
import type { AzureOptions } from './pod.ts';

/** The ServiceAccount's tenant (clouds/azure/pod.ts): the user's choice, not a default. */
const TENANT_ANNOTATION = 'azure.workload.identity/tenant-id';

export interface AzureDeclared {
  /** Lowercase: Entra ids are case-insensitive. */
  tenantId: string;
  cloud: AzureCloud;
  /** With a trailing slash; undefined: the cloud's own. */
  authorityHost: string | undefined;
}

export type AzureField = 'tenant' | 'clientId' | 'cloud';

/** Azure's options with what a matched identity provider adds to the flags'. */
export interface AzurePolicyOptions extends AzureOptions {
  /** AZURE_AUTHORITY_HOST in place of the cloud's (a declared identity provider's authorityHost). */
  authorityHost?: string;
}

export const azurePolicy: CloudPolicy<AzurePolicyOptions, AzureDeclared, AzureField> = {
  identityFields: ['tenant', 'clientId', 'cloud'],
  schema: {
    required: ['tenantId'],
    properties: {
      tenantId: { type: 'string', description: 'the Entra tenant (GUID or verified domain)' },
      cloud: { type: 'string', enum: Object.keys(AZURE_CLOUDS) },
      authorityHost: { type: 'string', description: "AZURE_AUTHORITY_HOST; default: the cloud's" },
    },
  },
  parseDeclared: (r, o, path) => {
    const tenantId = r.string(o.tenantId, `${path}.tenantId`, true);
    if (tenantId !== undefined && !isTenantId(tenantId))
      r.fail(
        `${path}.tenantId`,
        `Invalid value: ${JSON.stringify(tenantId)}: a tenant id (GUID) or the tenant's domain`,
      );
    const cloudName = r.string(o.cloud, `${path}.cloud`, false);
    if (cloudName !== undefined && !(cloudName in AZURE_CLOUDS))
      r.fail(
        `${path}.cloud`,
        `Unsupported value: ${JSON.stringify(cloudName)}: supported values: ${Object.keys(AZURE_CLOUDS).join(', ')}`,
      );
    const host = r.string(o.authorityHost, `${path}.authorityHost`, false);
    if (host !== undefined && URL.parse(host)?.protocol !== 'https:')
      r.fail(
        `${path}.authorityHost`,
        `Invalid value: ${JSON.stringify(host)}: an https URL such as https://login.microsoftonline.com/`,
      );
    return {
      // A field in error leaves '': the reader's problem drops the whole identity provider.
      tenantId: tenantId?.toLowerCase() ?? '',
      cloud: (cloudName as AzureCloud | undefined) ?? 'AzurePublicCloud',
      // SDKs join the host and the tenant: keep the trailing slash the clouds' hosts have.
      authorityHost: host === undefined ? undefined : host.endsWith('/') ? host : `${host}/`,
    };
  },
  identity: (raw) => ({
    // Entra ids are case-insensitive; policies compare one spelling.
    tenant: (raw.tenantId ?? '').toLowerCase(),
    clientId: (raw.clientId ?? '').toLowerCase(),
    cloud: raw.cloud ?? '',
  }),
  describeIdentity: (id) =>
    id.tenant ? `Entra tenant ${id.tenant}` : 'no Entra tenant (the ServiceAccount names none and no default applies)',
  describeDeclared: (p) => `tenant ${p.tenantId}`,
  match: (p, id) => (id.tenant && p.tenantId === id.tenant.toLowerCase() ? 'exact' : undefined),
  settle: ({ identity, serviceAccount, options, declared, defaults }) => {
    const annotated = serviceAccount?.annotations[TENANT_ANNOTATION]?.trim().toLowerCase() ?? '';
    const requested = { ...identity, tenant: annotated };
    const computed = defaults(requested);
    if (isDenial(computed)) return computed;
    // The ServiceAccount's own tenant wins at the provider: no default replaces it.
    if (annotated) return { identity: requested, defaults: { ...computed, tenant: undefined } };
    const tenant = computed.tenant ?? (declared.length === 1 ? declared[0].tenantId : undefined) ?? options.tenantId;
    if (!tenant) return { identity: requested, defaults: computed };
    return { identity: { ...requested, tenant: tenant.toLowerCase() }, defaults: { ...computed, tenant } };
  },
};

/**
 * The Pod provider with a declared authority host in place of the cloud's: AZURE_AUTHORITY_HOST
 * in the env groups and the identity record.
 */
export function withAuthorityHost(provider: PodProvider, authorityHost: string | undefined): PodProvider {
  if (authorityHost === undefined) return provider;
  return {
    ...provider,
    resolvePod: (ctx) => {
      const injection = provider.resolvePod(ctx);
      return injection === undefined || isDenial(injection) ? injection : withHost(injection, authorityHost);
    },
  };
}

function withHost(injection: Injection, authorityHost: string): Injection {
  return {
    ...injection,
    envGroups: injection.envGroups.map((group) =>
      group.map((e) => (e.name === 'AZURE_AUTHORITY_HOST' ? { ...e, value: authorityHost } : e)),
    ),
    identity: { ...injection.identity, authorityHost },
  };
}
