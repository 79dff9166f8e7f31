// Azure in tenant policy: an identity provider is an Entra tenant with its national cloud and
// authority host; a policy sees the tenant, the client id and the cloud. Only a tenant the
// ServiceAccount names is requested: any other is a default (computed, the one declared tenant,
// or --azure-tenant-id).
import type { CloudPolicy } from '../types.ts';
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

export const azurePolicy: CloudPolicy<AzureOptions, AzureDeclared, AzureField> = {
  identityFields: ['tenant', 'clientId', 'cloud'],
  schema: {
    required: ['tenantId'],
    properties: {
      tenantId: { type: 'string', description: 'the Entra tenant (GUID or verified domain)' },
      cloud: { type: 'string', enum: Object.keys(AZURE_CLOUDS) },
      authorityHost: { type: 'string', description: "AZURE_AUTHORITY_HOST; default: the cloud's" },
    },
  },
  tenantProblem: (value) => (isTenantId(value) ? undefined : "is not a tenant id (a GUID or the tenant's domain)"),
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
  overrides: (p) => ({ azureCloud: p.cloud }),
  request: (id, serviceAccount) => {
    id.tenant = serviceAccount?.annotations[TENANT_ANNOTATION]?.trim().toLowerCase() ?? '';
  },
  settle: (id, computed, declared, options) => {
    if (id.tenant) {
      computed.tenant = undefined;
      return;
    }
    const tenant = computed.tenant ?? (declared.length === 1 ? declared[0].tenantId : undefined) ?? options.tenantId;
    if (tenant) {
      computed.tenant = tenant;
      id.tenant = tenant.toLowerCase();
    }
  },
  finish: (injection, p) =>
    p.authorityHost === undefined
      ? injection
      : {
          ...injection,
          envGroups: injection.envGroups.map((group) =>
            group.map((e) => (e.name === 'AZURE_AUTHORITY_HOST' ? { ...e, value: p.authorityHost! } : e)),
          ),
          identity: { ...injection.identity, authorityHost: p.authorityHost },
        },
};
