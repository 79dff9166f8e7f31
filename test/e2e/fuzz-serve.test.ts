// The fuzz of issue #19, end to end: seeded mutations of valid AdmissionReviews (the Pods of
// examples/, and the same Pods as the webhook left them, reinvoked for another ServiceAccount) sent
// over HTTPS to a real `serve` inside the chart's memory limit (a memory cgroup with the chart's
// NODE_OPTIONS). Asserted: no HTTP 5xx, no internal-error denial, every patch applies to the
// object it was computed for (fast-json-patch, validating) and adds no shape the API server's Pod
// validation refuses; for a sample, kube-apiserver itself (dry-run create) accepts the patched Pod
// whenever it accepts the Pod as sent. The webhook is alive and never OOM-killed at the end.
// A failure prints its seed: WIW_FUZZ_SEED=<base> and the run number reproduce it (the mutator
// is test/support/review-fuzz.ts; test/unit/fuzz.test.ts holds a unit test per cause found).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent } from 'node:https';
import fastJsonPatch from 'fast-json-patch';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { chartMemory, memoryCgroup, rssMiB, type MemoryCgroup } from '../support/cgroup.ts';
import { addedViolations, examples, mutateReview, podReview, rng, type Obj } from '../support/review-fuzz.ts';
import { startWebhook, type WebhookProcess } from '../support/webhook.ts';
import { httpsRequest, type HttpsResponse } from '../support/https-client.ts';
import { TENANT } from '../support/identities.ts';

const BASE_SEED = Number(process.env.WIW_FUZZ_SEED ?? 20261123);
const RUNS = Number(process.env.WIW_FUZZ_SERVE_RUNS ?? 20_000);
const CONCURRENCY = 8;
/** Runs with a patch whose number is a multiple of this go through kube-apiserver too (1: all, ~50 s more). */
const DRY_RUN_EVERY = Number(process.env.WIW_FUZZ_DRY_RUN_EVERY ?? 16);
const NS = 'demo';

let cp: ControlPlane;
let wh: WebhookProcess;
let cgroup: MemoryCgroup;
let agent: Agent;

before(async () => {
  const memory = chartMemory();
  cgroup = memoryCgroup('fuzz-serve', memory.limit);
  // The ServiceAccount admission plugin on, as in a real cluster (the harness turns it off): it
  // names the `default` ServiceAccount on a Pod that names none before any webhook sees the Pod.
  cp = await startControlPlane({
    name: 'fuzz-serve',
    extraArgs: ['--disable-admission-plugins=DefaultStorageClass'],
  });
  await createNamespace(cp, NS);
  await createServiceAccount(cp, NS, 'default', {});
  for (const sa of examples().serviceAccounts)
    await createServiceAccount(cp, NS, sa.metadata.name, sa.metadata.annotations ?? {});
  wh = await startWebhook(cp, ['--azure-tenant-id', TENANT], {
    wrap: cgroup.wrap,
    env: { NODE_OPTIONS: memory.nodeOptions },
  });
  agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY, ca: wh.caPem });
});

after(async () => {
  agent?.destroy();
  await wh?.stop();
  await cp?.stop();
  cgroup?.remove();
});

/** A review POSTed to the webhook over the keep-alive agent. */
function post(body: string): Promise<HttpsResponse> {
  return httpsRequest(`${wh.url}/mutate`, {
    method: 'POST',
    ca: wh.caPem,
    agent,
    body,
    headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
    timeoutMs: 15_000,
  });
}

interface Response {
  uid: string;
  allowed: boolean;
  patchType?: string;
  patch?: string;
  status?: { code: number; message: string };
}

/** kube-apiserver's verdict on creating `pod` (dry run: validated and admitted, never stored). */
async function apiServerAccepts(pod: unknown): Promise<{ ok: boolean; message: string }> {
  const res = await cp.request('POST', `/api/v1/namespaces/${NS}/pods?dryRun=All`, pod);
  return { ok: res.status === 201, message: res.body.slice(0, 300) };
}

/** The example reviews, and the Pods the webhook mutated named for each other ServiceAccount. */
async function baseReviews(): Promise<Obj[]> {
  const { pods, serviceAccounts } = examples();
  const bases = pods.map((pod, i) => podReview(pod, `base-${i}`, NS));
  for (const [i, pod] of pods.entries()) {
    const { body: text } = await post(JSON.stringify(bases[i]));
    const response = (JSON.parse(text) as { response: Response }).response;
    if (!response.patch) continue;
    const patch = JSON.parse(Buffer.from(response.patch, 'base64').toString()) as fastJsonPatch.Operation[];
    const out = fastJsonPatch.applyPatch(structuredClone(pod), patch, true, false).newDocument as {
      spec: { serviceAccountName: string };
    };
    for (const sa of serviceAccounts)
      if (sa.metadata.name !== out.spec.serviceAccountName)
        bases.push(podReview({ ...out, spec: { ...out.spec, serviceAccountName: sa.metadata.name } }, `re-${i}`, NS));
  }
  return bases;
}

describe('fuzz through serve', () => {
  test(`${RUNS} mutated reviews over HTTPS in the chart's memory limit: no 5xx, no internal error, every patch applies and breaks no Pod`, async (t) => {
    const bases = await baseReviews();
    assert.ok(bases.length > 10, `${bases.length} base reviews`);
    const outcomes = new Map<string, number>();
    const count = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1);
    const failures: string[] = [];
    const fail = (seed: number, what: string) => {
      count(`FAIL ${what.split(':')[0]}`);
      if (failures.length < 10) failures.push(`seed ${seed}: ${what}`);
    };
    const dryRuns = { sampled: 0, originalAccepted: 0 };

    async function one(run: number): Promise<void> {
      const seed = BASE_SEED + run;
      const r = rng(seed);
      const base = r.pick(bases);
      const review = mutateReview({ ...base, request: { ...(base.request as Obj), uid: `run-${run}` } }, r);
      const body = JSON.stringify(review);
      const { status, body: text } = await post(body);
      if (status >= 500) return fail(seed, `HTTP ${status}: ${text.slice(0, 200)}`);
      if (status !== 200) return void count(`HTTP ${status}`);
      const response = (JSON.parse(text) as { response: Response }).response;
      if (!response.allowed) {
        // Internal errors are also counted by the webhook's own metric, asserted below.
        if (/failed on this object/.test(response.status?.message ?? ''))
          return fail(seed, `internal error: ${response.status?.message}`);
        return void count('denied');
      }
      if (!response.patch) return void count('allowed unchanged');
      count('mutated');
      if (response.patchType !== 'JSONPatch') return fail(seed, `patchType ${response.patchType}`);
      const object = (JSON.parse(body) as { request: { object: unknown } }).request.object;
      const patch = JSON.parse(Buffer.from(response.patch, 'base64').toString()) as fastJsonPatch.Operation[];
      let patched: unknown;
      try {
        patched = fastJsonPatch.applyPatch(structuredClone(object), patch, true, false).newDocument;
      } catch (err) {
        return fail(seed, `patch does not apply: ${(err as Error).message.split('\n')[0]}`);
      }
      const broken = addedViolations(object, patched);
      if (broken.length) return fail(seed, `patch breaks the Pod: ${broken.join(', ')}`);
      if (run % DRY_RUN_EVERY !== 0) return;
      dryRuns.sampled++;
      if (!(await apiServerAccepts(object)).ok) return;
      dryRuns.originalAccepted++;
      const verdict = await apiServerAccepts(patched);
      if (!verdict.ok) fail(seed, `kube-apiserver refuses the patched Pod it accepts unpatched: ${verdict.message}`);
    }

    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let run = next++; run < RUNS; run = next++) await one(run);
      }),
    );
    const seconds = (performance.now() - started) / 1000;

    const metrics = await wh.metrics();
    const internal = Number(/wiw_denials_total\{reason="InternalError"\} (\d+)/.exec(metrics)?.[1] ?? 0);
    const alive = wh.process.exitStatus() === null;
    const memory = alive ? rssMiB(wh.process.pid) : { rss: Number.NaN, hwm: Number.NaN };
    t.diagnostic(
      `${RUNS} reviews in ${seconds.toFixed(1)} s: ${JSON.stringify(Object.fromEntries(outcomes))}; ` +
        `dry runs ${dryRuns.sampled}, ${dryRuns.originalAccepted} accepted unpatched; webhook RSS ${memory.rss.toFixed(0)} MiB ` +
        `(peak ${memory.hwm.toFixed(0)}), cgroup peak ${cgroup.peakMiB().toFixed(0)} MiB, OOM kills ${cgroup.oomKills()}`,
    );
    assert.deepEqual(failures, [], `${failures.length}+ failures (first 10 listed)`);
    assert.equal(internal, 0, 'wiw_denials_total{reason="InternalError"}');
    assert.ok(alive, `the webhook exited: ${wh.process.exitStatus()}`);
    assert.equal(cgroup.oomKills(), 0, 'OOM kills in the cgroup');
    // The generator reaches the mutation core, and kube-apiserver judged enough patched Pods.
    assert.ok((outcomes.get('mutated') ?? 0) > RUNS / 5, `mutated ${outcomes.get('mutated')} of ${RUNS}`);
    assert.ok(dryRuns.originalAccepted >= 20, `kube-apiserver accepted ${dryRuns.originalAccepted} sampled Pods`);
  });
});
