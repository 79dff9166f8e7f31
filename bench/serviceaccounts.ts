// node bench/serviceaccounts.ts [--count 200000] [--namespaces 2000] [--also other/cli.js] (as
// root): the ServiceAccount
// cache at a large cluster's scale (issue 30), under the chart's memory limit (a memory cgroup of
// 256 MiB and the image's NODE_OPTIONS). Creates `count` ordinary ServiceAccounts over
// `namespaces` namespaces (8 in 10 plain, 1 in 10 with a role ARN, 1 in 10 with an Azure client
// and tenant id), starts `serve`, and prints once it has listed them: how many are cached and how
// many left out for the budget, the time the list took, the heap in use (the list's garbage
// included, then the least seen while 40 reviews of 1 MiB make V8 collect), RSS and the cgroup's
// peak. --also: the same for another build (e.g. main's, to compare), against the same cluster.
import { parseArgs } from 'node:util';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { chartMemory, memoryCgroup, rssMiB } from '../test/support/cgroup.ts';
import { throwawayReview } from '../test/support/heap.ts';
import { startWebhook, until, type WebhookProcess } from '../test/support/webhook.ts';
import { createAll } from './support/cluster.ts';

const { values: opts } = parseArgs({
  options: {
    count: { type: 'string', default: '200000' },
    namespaces: { type: 'string', default: '2000' },
    also: { type: 'string', multiple: true, default: [] },
  },
});
const COUNT = Number(opts.count);
const NAMESPACES = Number(opts.namespaces);
const { limit, nodeOptions } = chartMemory();

function annotationsOf(i: number): Record<string, string> {
  if (i % 10 === 0) return { 'eks.amazonaws.com/role-arn': `arn:aws:iam::111122223333:role/app-${i}` };
  if (i % 10 === 1)
    return {
      'azure.workload.identity/client-id': '8f3b2c1a-7d4e-4f5a-9b6c-0d1e2f3a4b5c',
      'azure.workload.identity/tenant-id': '72f988bf-86f1-41af-91ab-2d7cd011db47',
    };
  return {};
}

const metricOf = (text: string, name: string) =>
  Number(
    text
      .split('\n')
      .find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{what="ServiceAccount"} `))
      ?.split(' ')
      .pop() ?? 0,
  );

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

/** The least heap in use while reviews of 1 MiB (garbage once answered) make V8 collect. */
async function settledHeap(wh: WebhookProcess): Promise<number> {
  const settle = throwawayReview(wh, 'team-0', 'app-0');
  let least = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 40; i++) {
    await settle();
    least = Math.min(least, metricOf(await wh.metrics(), 'nodejs_heap_size_used_bytes'));
  }
  return least;
}

/** Starts `cli` in a cgroup of the chart's limit, waits for its list, and prints what it holds. */
async function measure(cp: Awaited<ReturnType<typeof startControlPlane>>, cli: string | undefined): Promise<void> {
  const cgroup = memoryCgroup('bench-serviceaccounts', limit);
  try {
    const t = Date.now();
    const wh = await startWebhook(cp, [], {
      // Another build: its cli.js in place of the one startWebhook runs.
      wrap: (command, args) => cgroup.wrap(command, cli ? [cli, ...args.slice(1)] : args),
      env: { NODE_OPTIONS: nodeOptions },
      readyTimeoutMs: 300_000,
    });
    const seen = async () => {
      const text = await wh.metrics();
      const kept = metricOf(text, 'wiw_serviceaccount_cache_size');
      const over = metricOf(text, 'wiw_serviceaccount_cache_over_budget_total');
      return kept + over >= COUNT ? { text, kept, over } : undefined;
    };
    const { text, kept, over } = await until('the webhook to list every ServiceAccount', seen, 300_000);
    const listed = (Date.now() - t) / 1000;
    const rss = rssMiB(wh.process.pid);
    const settled = await settledHeap(wh);
    console.log(
      `${cli ?? 'dist/cli.js'} in a ${limit / 2 ** 20} MiB cgroup, NODE_OPTIONS="${nodeOptions}": listed in ${listed.toFixed(1)} s; ` +
        `${kept} cached, ${over} left out for the budget; cache counted ${mib(metricOf(text, 'wiw_serviceaccount_cache_bytes'))} MiB`,
    );
    console.log(
      `  heap used ${mib(metricOf(text, 'nodejs_heap_size_used_bytes'))} MiB of ${mib(metricOf(text, 'nodejs_heap_size_total_bytes'))} ` +
        `once listed, ${mib(settled)} once collected; RSS ${rss.rss.toFixed(0)} MiB (peak ${rss.hwm.toFixed(0)}); ` +
        `cgroup peak ${cgroup.peakMiB().toFixed(0)} MiB; OOM kills ${cgroup.oomKills()}`,
    );
    await wh.stop();
  } finally {
    cgroup.remove();
  }
}

const cp = await startControlPlane({ name: 'bench-serviceaccounts' });
try {
  const t = Date.now();
  await createAll(
    cp,
    Array.from({ length: NAMESPACES }, (_, n) => ({
      path: '/api/v1/namespaces',
      body: { metadata: { name: `team-${n}` } },
    })),
  );
  await createAll(
    cp,
    Array.from({ length: COUNT }, (_, i) => ({
      path: `/api/v1/namespaces/team-${i % NAMESPACES}/serviceaccounts`,
      body: { metadata: { name: `app-${i}`, annotations: annotationsOf(i) } },
    })),
  );
  console.log(
    `${COUNT} ServiceAccounts in ${NAMESPACES} namespaces created in ${((Date.now() - t) / 1000).toFixed(0)} s`,
  );
  for (const cli of [undefined, ...(opts.also ?? [])]) await measure(cp, cli);
} finally {
  await cp.stop();
}
