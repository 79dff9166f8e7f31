// Why a Pod slipped past, where the cluster tells: the webhook's MutatingWebhookConfiguration
// entries (named *.workload-identity-webhook.io, as the chart names them) judged against the Pod
// and its namespace as the API server judges them: no entry at all, selectors that leave it out,
// created before the configuration, or an entry with failurePolicy Ignore (the webhook did not
// answer). What it cannot tell, it says.
import { type KubeApi, apiPath } from '../kube/api.ts';
import { type LabelSelector, selects } from '../kube/label-selector.ts';
import type { Pod } from '../kube/types.ts';
import { errorMessage } from '../errors.ts';

/** The webhooks' names end so (the chart's, and any registration the docs show). */
const ENTRY_SUFFIX = '.workload-identity-webhook.io';

interface Entry {
  configuration: string;
  created: number;
  failurePolicy: string;
  namespaceSelector?: LabelSelector;
  objectSelector?: LabelSelector;
}

interface RawWebhook {
  name?: string;
  failurePolicy?: string;
  namespaceSelector?: LabelSelector;
  objectSelector?: LabelSelector;
  rules?: { operations?: string[]; resources?: string[]; apiGroups?: string[] }[];
}

interface RawConfiguration {
  metadata?: { name?: string; creationTimestamp?: string };
  webhooks?: RawWebhook[];
}

function forPodCreate(w: RawWebhook): boolean {
  return (w.rules ?? []).some(
    (r) =>
      (r.apiGroups ?? []).some((g) => g === '' || g === '*') &&
      (r.operations ?? []).some((o) => o === 'CREATE' || o === '*') &&
      (r.resources ?? []).some((x) => x === 'pods' || x === '*'),
  );
}

export class SlipReasons {
  readonly #api: KubeApi;
  readonly #entries: Entry[] | string;
  readonly #namespaces = new Map<string, Promise<Record<string, string> | undefined>>();

  private constructor(api: KubeApi, entries: Entry[] | string) {
    this.#api = api;
    this.#entries = entries;
  }

  /** Reads the webhook configurations once; unreadable ones leave every reason unknown. */
  static async load(api: KubeApi): Promise<SlipReasons> {
    try {
      const list = await api.request<{ items?: RawConfiguration[] }>(
        'GET',
        '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
      );
      const entries = (list.items ?? []).flatMap((c) =>
        (c.webhooks ?? [])
          .filter((w) => w.name?.endsWith(ENTRY_SUFFIX) && forPodCreate(w))
          .map((w) => ({
            configuration: c.metadata?.name ?? '',
            created: Date.parse(c.metadata?.creationTimestamp ?? '') || 0,
            failurePolicy: w.failurePolicy ?? 'Fail',
            namespaceSelector: w.namespaceSelector,
            objectSelector: w.objectSelector,
          })),
      );
      return new SlipReasons(api, entries);
    } catch (err) {
      return new SlipReasons(api, `unknown: cannot read MutatingWebhookConfigurations (${errorMessage(err)})`);
    }
  }

  async why(pod: Pod): Promise<string> {
    if (typeof this.#entries === 'string') return this.#entries;
    if (this.#entries.length === 0)
      return `no MutatingWebhookConfiguration has a *${ENTRY_SUFFIX} entry for Pods: the webhook is not called at all`;
    const namespace = pod.metadata?.namespace ?? 'default';
    const nsLabels = await this.#namespaceLabels(namespace);
    const labels = pod.metadata?.labels ?? {};
    const inNamespace = this.#entries.filter((e) => nsLabels === undefined || selects(e.namespaceSelector, nsLabels));
    if (inNamespace.length === 0)
      return `the webhook skips namespace ${namespace}: it is outside every entry's namespaceSelector`;
    const calling = inNamespace.filter((e) => selects(e.objectSelector, labels));
    if (calling.length === 0) return "the webhook skips it: its labels are outside every entry's objectSelector";
    const created = Date.parse(String(pod.metadata?.creationTimestamp ?? '')) || 0;
    const first = calling.reduce((a, b) => (a.created <= b.created ? a : b));
    if (created < first.created)
      return `created before the webhook was registered (MutatingWebhookConfiguration ${first.configuration})`;
    if (calling.some((e) => e.failurePolicy === 'Ignore'))
      return 'created while the webhook did not answer: failurePolicy Ignore admitted it unchanged';
    return 'the webhook is called for it (failurePolicy Fail): the ServiceAccount was probably given its identity after the Pod was created';
  }

  #namespaceLabels(namespace: string): Promise<Record<string, string> | undefined> {
    let found = this.#namespaces.get(namespace);
    if (!found) {
      found = this.#api
        .request<{ metadata?: { labels?: Record<string, string> } }>(
          'GET',
          apiPath('api', 'v1', 'namespaces', namespace),
        )
        .then(
          (ns) => ns.metadata?.labels ?? {},
          () => undefined,
        );
      this.#namespaces.set(namespace, found);
    }
    return found;
  }
}
