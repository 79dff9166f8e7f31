import type { Logger } from 'pino';
import type { KubeApi } from '../kube/api.ts';
import type { Config } from '../config.ts';
import type { Metrics } from '../metrics.ts';
import type { Lifecycle } from '../kube/lifecycle.ts';
import { NamespaceCache } from '../kube/namespace-cache.ts';
import { PolicyWatch } from './watch.ts';
import { judgesOf, type PolicyGate, type TenantJudges } from './gate.ts';
import { loadPolicyFile } from './load.ts';
import { providerOptionsFromConfig } from '../clouds/index.ts';
import { PolicyStore, summary } from './store.ts';

/** Tenant policy in `serve`: the store, its sources (file, cluster) and the namespace cache. */
interface TenantPolicy {
  gate: PolicyGate;
  /** What admission asks of it, per namespace. */
  judges: TenantJudges;
  /** The namespace cache and the policy watch: only once both are synced is an admission judged as it should be. */
  parts: Lifecycle[];
}

/** undefined when neither --watch-policies nor --policy-file is given: admission is then exactly as without policy. */
export function createTenantPolicy(
  config: Config,
  api: KubeApi,
  log: Logger,
  metrics?: Metrics,
): TenantPolicy | undefined {
  if (!config.watchPolicies && !config.policyFile) return undefined;
  const store = new PolicyStore(config.policyFailureMode);
  if (config.policyFile) {
    for (const result of loadPolicyFile(config.policyFile)) {
      const enforcement = store.put(result);
      const fields = { policy: result.name, source: result.source, enforcement: enforcement.state };
      if (result.ok) log.info({ ...fields, examples: result.examples }, 'tenant policy in force');
      else log.error({ ...fields, problems: result.problems }, `tenant policy not used: ${summary(result)}`);
    }
  }
  const namespaces = new NamespaceCache({
    api,
    log,
    metrics,
    missTimeoutMs: config.cacheMissTimeoutMs,
    missReadsPerSecond: config.cacheMissRate,
  });
  const watch = config.watchPolicies ? new PolicyWatch({ api, store, log }) : undefined;
  const gate: PolicyGate = {
    current: () => store.current(),
    options: providerOptionsFromConfig(config),
    namespace: (name) => namespaces.lookup(name),
  };
  return { gate, judges: judgesOf(gate), parts: watch ? [namespaces, watch] : [namespaces] };
}
