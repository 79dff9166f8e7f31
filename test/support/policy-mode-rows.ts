// The rows of docs/compatibility.md's policy mode section: each names one difference between the
// Pod the MutatingAdmissionPolicy makes and `preview`'s, and recognises it, and only it.
import type { Pod } from '../../src/kube/types.ts';
import type { Difference } from './peer-diff-compare.ts';

export interface PolicyRowContext {
  /** The Pod as written, before admission. */
  pod: Pod;
  /** Its ServiceAccount's annotations. */
  serviceAccount: Record<string, string>;
}

export interface PolicyRow {
  id: string;
  explains(d: Difference, ctx: PolicyRowContext): boolean;
}

const RECORD = 'workload-identity-webhook.io/injected';
const annotated = (ctx: PolicyRowContext, key: string) => ctx.pod.metadata?.annotations?.[key] !== undefined;
const envName = (d: Difference) => /\.env\[([A-Z_]+)\](\.value)?$/.exec(d.path)?.[1];
const EXPIRATION_KEYS = [
  'eks.amazonaws.com/token-expiration',
  'azure.workload.identity/service-account-token-expiration',
  'cloud.google.com/token-expiration',
];

export const POLICY_ROWS: PolicyRow[] = [
  {
    // The policy cannot sign: the webhook's record is an HMAC over what it added.
    id: 'policy-no-injection-record',
    explains: (d) =>
      (d.path === `metadata.annotations.${RECORD}` && d.ours === undefined) ||
      (d.path === 'metadata.annotations' && d.ours === undefined && Object.keys(d.theirs as object).join() === RECORD),
  },
  {
    id: 'policy-pod-token-expiration',
    explains: (d, ctx) =>
      EXPIRATION_KEYS.some((k) => annotated(ctx, k)) &&
      (/^spec\.volumes\[[a-z-]+\]\.projected\.sources$/.test(d.path) ||
        // pfnet's dialect writes the lifetime it used back into the Pod's annotation.
        d.path === 'metadata.annotations.cloud.google.com/token-expiration'),
  },
  {
    id: 'policy-pod-region',
    explains: (d, ctx) =>
      annotated(ctx, 'eks.amazonaws.com/region') && ['AWS_REGION', 'AWS_DEFAULT_REGION'].includes(envName(d) ?? ''),
  },
  {
    id: 'policy-pod-session-name',
    explains: (d, ctx) =>
      annotated(ctx, 'eks.amazonaws.com/role-session-name') && envName(d) === 'AWS_ROLE_SESSION_NAME',
  },
  {
    id: 'policy-container-identities',
    explains: (d, ctx) =>
      (ctx.serviceAccount['eks.amazonaws.com/container-profiles'] !== undefined && envName(d) === 'AWS_PROFILE') ||
      (ctx.serviceAccount['azure.workload.identity/container-client-ids'] !== undefined &&
        envName(d) === 'AZURE_CLIENT_ID'),
  },
  {
    id: 'policy-azure-proxy-sidecar',
    explains: (d, ctx) =>
      annotated(ctx, 'azure.workload.identity/inject-proxy-sidecar') &&
      /^spec\.(initContainers|containers)(\(order\)|\[azwi-proxy(-init)?\])$/.test(d.path),
  },
  {
    id: 'policy-admits-conflicts',
    explains: (d) =>
      d.path === '(admission)' &&
      d.ours === 'admitted' &&
      String(d.theirs).startsWith('refused: ') &&
      /Conflict|already has/.test(String(d.theirs)),
  },
];
