// doctor's first step: the API server's discovery document as this kubeconfig reads it. The only
// step that ends doctor: when the API server cannot be reached, nothing after it can be checked.
import type { DiscoveryDocument } from '../issuer/discovery.ts';
import { readApiServerDiscovery } from '../issuer/read.ts';
import type { DoctorContext } from './context.ts';
import type { Check } from './verdicts.ts';

interface ApiServerDiscovery {
  findings: Check[];
  /** False when the API server did not answer at all. */
  reached: boolean;
  /** The document, when the API server served one. */
  discovery: DiscoveryDocument | undefined;
}

export async function apiServerDiscovery(ctx: DoctorContext): Promise<ApiServerDiscovery> {
  ctx.waiting(`the API server's discovery document (${ctx.api.server})`);
  const fetched = await readApiServerDiscovery(ctx.api);
  if (fetched.ok) {
    const pass: Check = {
      id: 'discovery',
      verdict: 'pass',
      message: `the API server serves its discovery document: issuer ${fetched.value.issuer}, jwks_uri ${fetched.value.jwks_uri}`,
    };
    return { findings: [pass], reached: true, discovery: fetched.value };
  }
  if (fetched.status === undefined) {
    const unreachable: Check = {
      id: 'api-server',
      verdict: 'unknown',
      message: `cannot reach the API server at ${ctx.api.server}: ${fetched.problem}`,
      fix: 'check --kubeconfig and the network path to the API server',
    };
    return { findings: [unreachable], reached: false, discovery: undefined };
  }
  const refused = fetched.status === 401 || fetched.status === 403;
  const finding: Check = refused
    ? {
        id: 'discovery',
        verdict: 'unknown',
        message: `the API server refuses these credentials the discovery document (${fetched.problem})`,
        fix: 'use a kubeconfig allowed to GET /.well-known/openid-configuration',
      }
    : {
        id: 'discovery',
        verdict: 'fail',
        message: `the API server serves no discovery document at ${fetched.url} (${fetched.problem}); it serves none when --service-account-issuer is not an https URL`,
        fix: 'start kube-apiserver with --service-account-issuer=https://<host the clouds can reach>',
      };
  return { findings: [finding], reached: true, discovery: undefined };
}
