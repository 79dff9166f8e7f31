// The core of bench:apiserver (--servers ...,core): the floor (support/floor.ts) answering with
// serve's own admission core: parseAdmissionReview, admitPod (resolve, judge, plan, the injection
// record, the patch) and reviewResponse, with the providers serve has for the same flags and the
// ServiceAccounts of a file in a Map (serve's cache is a Map too). No fastify, limits, decision log
// or metrics. Between the floor and serve, it splits what serve adds: the core's share, then the
// framework's (the HTTP framework, budgets, log, metrics).
import { randomBytes } from 'node:crypto';
import { admitPod } from '../../src/admission/pods.ts';
import { parseAdmissionReview, reviewResponse } from '../../src/admission/review.ts';
import { createProviders } from '../../src/clouds/index.ts';
import { loadConfig } from '../../src/config.ts';
import type { ServiceAccountView } from '../../src/kube/types.ts';
import { RecordKeys } from '../../src/mutate/injection-record.ts';

/** What the core is given: serve's flags (as `--name value` pairs, without dashes) and the accounts. */
export interface CoreFile {
  flags: Record<string, string>;
  accounts: ServiceAccountView[];
}

/** The body of the answer to a review's body, as serve would give it for a Pod. */
export function coreAnswer(file: CoreFile): (body: Buffer) => Promise<string> {
  const config = loadConfig(new Map(Object.entries(file.flags)), {});
  const providers = createProviders(config);
  const accounts = new Map(file.accounts.map((a) => [`${a.namespace}/${a.name}`, a]));
  const lookup = async (namespace: string, name: string) => accounts.get(`${namespace}/${name}`);
  const recordKeys = RecordKeys.derive(randomBytes(32));
  const options = { onUnresolved: config.failurePolicy, recordKeys, maxContainers: config.maxContainers };
  return async (body) => {
    const review = parseAdmissionReview(JSON.parse(body.toString('utf8')));
    const decision = await admitPod(providers, lookup, review.request, undefined, options);
    return reviewResponse(review.apiVersion, review.request.uid, decision);
  };
}
