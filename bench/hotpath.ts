// The fixed cost of serve's /mutate route in process (fastify's inject: no TLS, no sockets), the
// real admission, metrics and decision log (to /dev/null) behind it; with --old DIR, that
// directory's src/ (another build) measured beside this one in alternating rounds, which a loaded
// machine's noise affects alike. Prints the CPU per review of each round.
//   node bench/hotpath.ts [--old DIR] [--corpus charts|bench] [--rounds 5] [--reviews 4000]
// DIR holds another build's src/ where its packages resolve, e.g. inside this checkout:
//   mkdir .old && git archive main src | tar -x -C .old
import { openSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { serviceAccountAnnotations } from '../src/clouds/index.ts';
import { slimServiceAccount } from '../src/kube/serviceaccount-cache.ts';
import type { ServiceAccountView } from '../src/kube/types.ts';
import { SECRET_SERVICE_ACCOUNT_ANNOTATIONS } from '../src/model.ts';
import { RecordKeys } from '../src/mutate/injection-record.ts';
import { providers as makeProviders } from '../test/support/builders.ts';
import { chartObjects, serviceAccount, streamReviews, type Corpus } from './support/corpora.ts';

const { values: opts } = parseArgs({
  options: {
    old: { type: 'string' },
    corpus: { type: 'string', default: 'charts' },
    rounds: { type: 'string', default: '5' },
    reviews: { type: 'string', default: '4000' },
    // Where the decision lines go (appended), as serve's stdout to a file; /dev/null by default.
    log: { type: 'string', default: '/dev/null' },
  },
});
const corpus = opts.corpus as Corpus;
const ROUNDS = Number(opts.rounds);
const N = Number(opts.reviews);

const providers = makeProviders();
const bounds = [...serviceAccountAnnotations(providers), ...SECRET_SERVICE_ACCOUNT_ANNOTATIONS];
const accounts = new Map<string, ServiceAccountView>();
const keep = (namespace: string, raw: { metadata: Record<string, unknown> }) => {
  const view = slimServiceAccount({ ...raw, metadata: { ...raw.metadata, namespace } } as never, bounds);
  if (view) accounts.set(`${namespace}/${view.name}`, view);
};
if (corpus === 'charts') for (const o of chartObjects(['aws'])[1]) keep(o.path.split('/')[4], o.body as never);
else for (let i = 0; i < 2000; i++) keep(serviceAccount(i).namespace, serviceAccount(i).body as never);
const { reviews } = streamReviews('aws', corpus, 2000);
const recordKeys = RecordKeys.derive(Buffer.alloc(32, 7));

async function build(root: string) {
  const { buildApp } = await import(resolve(root, 'src/http/app.ts'));
  const { admitPod } = await import(resolve(root, 'src/admission/pods.ts'));
  const { createMetrics } = await import(resolve(root, 'src/metrics.ts'));
  const { createLogger, batchedDestination } = await import(resolve(root, 'src/log.ts'));
  const log = createLogger('info', batchedDestination(openSync(opts.log, 'a')));
  const lookup = async (ns: string, name: string) => accounts.get(`${ns}/${name}`);
  const app = buildApp({
    https: null,
    log: log.child({ component: 'admission' }),
    metrics: createMetrics(),
    admit: (request: { kind: { kind: string } }) =>
      admitPod(providers, lookup, request, undefined, { onUnresolved: 'Ignore', recordKeys, maxContainers: 100 }),
    isReady: () => true,
  });
  await app.ready();
  return app;
}

const builds: [string, Awaited<ReturnType<typeof build>>][] = [
  ['this', await build(resolve(import.meta.dirname, '..'))],
];
if (opts.old) builds.push(['old', await build(resolve(opts.old))]);
const headers = { 'content-type': 'application/json', 'content-length': '' };

async function run(app: (typeof builds)[number][1], n: number): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const payload = reviews[i % reviews.length];
    headers['content-length'] = String(payload.length);
    const res = await app.inject({ method: 'POST', url: '/mutate', payload, headers });
    if (res.statusCode !== 200) throw new Error(res.body);
  }
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

const kb = reviews.reduce((a, r) => a + r.length, 0) / reviews.length / 1000;
console.log(`corpus ${corpus}: ${reviews.length} reviews, mean ${kb.toFixed(1)} KB; ${N} reviews a round`);
for (const [, app] of builds) await run(app, N); // warm-up
const results: Record<string, number[]> = {};
for (let r = 0; r < ROUNDS; r++)
  for (const [name, app] of r % 2 ? [...builds].reverse() : builds) {
    (results[name] ??= []).push(await run(app, N));
  }
for (const [name, xs] of Object.entries(results)) {
  const sorted = [...xs].sort((a, b) => a - b);
  console.log(
    `${name}: µs CPU per review, median ${sorted[sorted.length >> 1].toFixed(1)}, min ${sorted[0].toFixed(1)} (rounds ${xs.map((x) => x.toFixed(0)).join(', ')})`,
  );
}
process.exit(0);
