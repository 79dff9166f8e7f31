// GCP in tenant policy: an identity provider is a workload identity pool, named by project number
// and pool id; a policy sees the pool's provider, the service account it may impersonate and both ids.
import { isDenial } from '../../errors.ts';
import type { CloudPolicy } from '../types.ts';
import { parseWorkloadIdentityProvider } from './external-account.ts';
import type { GcpOptions } from './options.ts';

const PROJECT_NUMBER = /^[0-9]{1,20}$/;
const POOL = /^[a-z0-9-]{4,32}$/;

export interface GcpDeclared {
  projectNumber: string;
  pool: string;
}

export type GcpField = 'projectNumber' | 'pool' | 'workloadIdentityProvider' | 'serviceAccountEmail';

export const gcpPolicy: CloudPolicy<GcpOptions, GcpDeclared, GcpField> = {
  identityFields: ['projectNumber', 'pool', 'workloadIdentityProvider', 'serviceAccountEmail'],
  schema: {
    required: ['projectNumber', 'pool'],
    properties: {
      projectNumber: { type: 'string', pattern: PROJECT_NUMBER.source },
      pool: { type: 'string', pattern: POOL.source },
    },
    defaults: { region: 'CLOUDSDK_COMPUTE_REGION' },
  },
  // A field in error leaves '': the reader's problem drops the whole identity provider.
  parseDeclared: (r, o, path) => ({
    projectNumber:
      r.matching(
        o.projectNumber,
        `${path}.projectNumber`,
        PROJECT_NUMBER,
        'the project number (digits, quoted in YAML), not its id',
        true,
      ) ?? '',
    pool:
      r.matching(
        o.pool,
        `${path}.pool`,
        POOL,
        'a workload identity pool id (4 to 32 lowercase letters, digits and "-")',
        true,
      ) ?? '',
  }),
  identity: (raw) => {
    const id = {
      workloadIdentityProvider: raw.workloadIdentityProvider ?? '',
      serviceAccountEmail: raw.serviceAccountEmail ?? '',
      projectNumber: raw.projectNumber ?? '',
      pool: raw.pool ?? '',
    };
    if ((!id.pool || !id.projectNumber) && id.workloadIdentityProvider) {
      const parsed = parseWorkloadIdentityProvider(id.workloadIdentityProvider, 'workloadIdentityProvider');
      if (!isDenial(parsed)) {
        id.projectNumber = parsed.projectNumber;
        id.pool = parsed.pool;
      }
    }
    return id;
  },
  describeIdentity: (id) => `workload identity pool ${id.pool} of project ${id.projectNumber}`,
  describeDeclared: (p) => `pool ${p.pool} of project ${p.projectNumber}`,
  match: (p, id) => (p.projectNumber === id.projectNumber && p.pool === id.pool ? 'exact' : undefined),
};
