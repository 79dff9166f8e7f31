import type { Logger } from 'pino';
import { apiPath, type KubeApi } from '../kube/api.ts';
import { compilePolicy } from './compile.ts';
import { POLICY_GROUP, POLICY_KIND, POLICY_PLURAL, POLICY_VERSION, type CompileResult } from './model.ts';
import { type PolicyStatus, policyStatus, statusChanged } from './status.ts';
import { summary, type PolicyStore } from './store.ts';
import { ListWatch, statusOf } from '../kube/list-watch.ts';
import { Watched } from '../kube/lifecycle.ts';

/** The source of cluster policies in the store. */
const CLUSTER_SOURCE = 'cluster';

type RawPolicy = {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; uid?: string; generation?: number; resourceVersion?: string };
  spec?: unknown;
  status?: unknown;
};

interface PolicyWatchOptions {
  api: KubeApi;
  store: PolicyStore;
  log: Logger;
  now?: () => Date;
}

/**
 * Keeps the store in step with the cluster's WorkloadIdentityPolicy objects and reports each
 * one's outcome in its status subresource. A policy is compiled once per generation; its status is
 * written only when it would change, so replicas agree without fighting (a write that loses a
 * race gets 409 and the next event decides again).
 */
export class PolicyWatch extends Watched {
  readonly #api: KubeApi;
  protected readonly source: ListWatch;
  readonly #store: PolicyStore;
  readonly #log: Logger;
  readonly #now: () => Date;
  readonly #compiled = new Map<string, { uid: string; generation: number; result: CompileResult }>();

  constructor({ api, store, log, now = () => new Date() }: PolicyWatchOptions) {
    super();
    this.#api = api;
    this.#store = store;
    this.#log = log;
    this.#now = now;
    this.source = new ListWatch({
      api,
      log,
      what: POLICY_KIND,
      path: apiPath('apis', POLICY_GROUP, POLICY_VERSION, POLICY_PLURAL),
      // No CRD: no cluster policies, and the webhook still starts (a file may hold the policies).
      absentStatus: 404,
      onList: (items) => {
        const names = new Set<string>();
        for (const item of items) {
          const name = this.#handle(item as RawPolicy);
          if (name) names.add(name);
        }
        for (const name of this.#store.names(CLUSTER_SOURCE)) if (!names.has(name)) this.#forget(name);
      },
      onEvent: (type, obj) => {
        const raw = obj as RawPolicy;
        if (type === 'DELETED') {
          if (raw.metadata?.name) this.#forget(raw.metadata.name);
        } else {
          this.#handle(raw);
        }
      },
    });
  }

  #forget(name: string): void {
    this.#compiled.delete(name);
    this.#store.delete(CLUSTER_SOURCE, name);
    this.#log.info({ policy: name }, 'tenant policy removed');
  }

  #handle(raw: RawPolicy): string | undefined {
    const name = raw.metadata?.name;
    if (!name) return undefined;
    const uid = raw.metadata?.uid ?? '';
    const generation = raw.metadata?.generation ?? 0;
    const known = this.#compiled.get(name);
    let result: CompileResult;
    if (known && known.uid === uid && known.generation === generation) result = known.result;
    else {
      // A new object of the same name starts over: its predecessor's last good version is not its own.
      if (known && known.uid !== uid) this.#store.delete(CLUSTER_SOURCE, name);
      result = compilePolicy({ name, generation, source: CLUSTER_SOURCE, spec: raw.spec });
      this.#compiled.set(name, { uid, generation, result });
      const enforcement = this.#store.put(result);
      const fields = { policy: name, generation, enforcement: enforcement.state };
      if (result.ok) this.#log.info({ ...fields, examples: result.examples }, 'tenant policy in force');
      else
        this.#log.warn(
          { ...fields, problems: result.problems.length, first: summary(result) },
          'tenant policy not used',
        );
    }
    // The status the API server keeps is one a replica of this webhook wrote (only it may write the subresource).
    const status = policyStatus(result, raw.status as Partial<PolicyStatus> | undefined, this.#now());
    if (statusChanged(raw.status, status)) void this.#writeStatus(name, raw, status);
    return name;
  }

  async #writeStatus(name: string, raw: RawPolicy, status: unknown): Promise<void> {
    try {
      await this.#api.request('PUT', apiPath('apis', POLICY_GROUP, POLICY_VERSION, POLICY_PLURAL, name, 'status'), {
        body: { ...raw, status },
      });
    } catch (err) {
      // 409: the object changed meanwhile; its next event brings the status to decide on. 404: deleted.
      const code = statusOf(err);
      if (code === 409 || code === 404) return;
      this.#log.warn(
        { policy: name, status: code, err },
        'cannot write the tenant policy status (RBAC: update on workloadidentitypolicies/status)',
      );
    }
  }
}
