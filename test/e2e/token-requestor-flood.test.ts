// Issue 28: the token requestor kept every annotation and the whole `config` of each labelled
// Secret, so a tenant who may create Secrets in a namespace it serves could fill its heap: a
// `config` that is valid YAML (a role and a long comment) passes every check until it is parsed.
// Here the tenant is a real RBAC user of its namespace, the requestor runs in the chart's memory
// cgroup with the image's NODE_OPTIONS (no webhook in front: the requestor bounds what it keeps on
// its own), and the tenant creates FLOOD labelled Secrets of about 1.1 MB each (a 200 KB annotation
// it does not read, and a 700 KB config). The requestor's heap stays flat, each of them gets a
// TokenRefused event naming `config` and its size, an ordinary Secret still gets its token, and a
// restarted requestor lists them all without dying.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api } from '@kubernetes/client-node';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { until } from '../harness/until.ts';
import { secretShapeError } from '../../src/admission/secrets.ts';
import { chartMemory, memoryCgroup, rssMiB, type MemoryCgroup } from '../support/cgroup.ts';
import { ROLE_ARN } from '../support/identities.ts';
import { labelledSecret, unb64 } from '../support/secrets.ts';
import { tenantClient } from '../support/tenant.ts';
import {
  leaseHolder,
  requestorKubeconfig,
  startTokenRequestor,
  type RequestorProcess,
} from '../support/token-requestor.ts';

/** At 1.1 MB each, well past what the requestor's 128 MiB heap held at 34d7c0c. */
const FLOOD = 160;
const CONCURRENCY = 8;
const SYSTEM = 'wiw-system';
const LEASE = 'token-requestor';

let cp: ControlPlane;
let cgroup: MemoryCgroup;
let admin: CoreV1Api;
let tenant: CoreV1Api;
let kubeconfig: string;
let requestor: RequestorProcess;

async function startRequestor(): Promise<void> {
  requestor = await startTokenRequestor(
    cp,
    kubeconfig,
    ['--lease-namespace', SYSTEM, '--lease-name', LEASE, '--lease-duration-seconds', '3', '--token-expiration', '600'],
    { wrap: cgroup.wrap, env: { NODE_OPTIONS: chartMemory().nodeOptions } },
  );
  await until(
    'the requestor to hold the Lease',
    async () => (await leaseHolder(cp, SYSTEM, LEASE)) === requestor.identity || undefined,
    30_000,
  );
}

before(async () => {
  cgroup = memoryCgroup('requestor-flood', chartMemory().limit);
  cp = await startControlPlane({ name: 'requestor-flood' });
  admin = cp.kubeConfig().makeApiClient(CoreV1Api);
  await createNamespace(cp, SYSTEM);
  await createNamespace(cp, 'tenant-a');
  await createServiceAccount(cp, 'tenant-a', 'app');
  tenant = await tenantClient(cp, 'tenant-a-admin', 'tenant-a', ['secrets']);
  kubeconfig = await requestorKubeconfig(cp, SYSTEM, LEASE);
  await startRequestor();
});

after(async () => {
  await requestor?.stop();
  await cp?.stop();
  cgroup?.remove();
});

/** A labelled Secret of about 1.1 MB: valid YAML config (a role and a 700 KB comment), a 200 KB annotation. */
function floodSecret(i: number) {
  const secret = labelledSecret('aws', {
    name: `flood-${i}`,
    namespace: 'tenant-a',
    annotations: { 'example.com/pad': 'p'.repeat(200_000) },
    config: `# ${'x'.repeat(700_000)}\nroleARN: ${ROLE_ARN}\n`,
  });
  return secret;
}

async function metric(name: string): Promise<number> {
  const exited = requestor.process.exitStatus();
  if (exited !== null)
    throw new Error(
      `the requestor exited (${exited}); OOM kills ${cgroup.oomKills()}\n${requestor.process.logTail(5)}`,
    );
  const text = await requestor.metrics();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{reason="MalformedObject"} `));
  return line ? Number(line.split(' ').pop()) : 0;
}

const heapMiB = async () => (await metric('nodejs_heap_size_used_bytes')) / 2 ** 20;

let extra = 0;
/**
 * The heap in use once the flood's garbage is collected: more Secrets of 1.1 MB (garbage as soon
 * as each is read) make V8 run full collections until the heap in use falls under `limit`; what
 * the requestor keeps never does. Returns the heap in use then and the Secrets it took.
 */
async function settledHeap(limit: number): Promise<{ heap: number; secrets: number }> {
  let heap = await heapMiB();
  let secrets = 0;
  await until(
    `the heap in use to fall under ${limit.toFixed(0)} MiB (it is ${heap.toFixed(1)})`,
    async () => {
      heap = await heapMiB();
      if (heap < limit) return true;
      await tenant.createNamespacedSecret({ namespace: 'tenant-a', body: floodSecret(FLOOD + extra++) });
      secrets++;
      return undefined;
    },
    60_000,
  );
  return { heap, secrets };
}

async function tokenOf(name: string): Promise<string> {
  return until(
    `a token in tenant-a/${name}`,
    async () => unb64((await admin.readNamespacedSecret({ namespace: 'tenant-a', name })).data?.token),
    30_000,
  );
}

describe('a tenant floods the token requestor', () => {
  test(`${FLOOD} labelled Secrets of 1.1 MB leave its heap flat; each is refused naming config and its size; a restart lists them`, async (t) => {
    const heapBefore = await heapMiB();
    const samples: string[] = [];
    let next = 0;
    try {
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          for (let i = next++; i < FLOOD; i = next++) {
            await tenant.createNamespacedSecret({ namespace: 'tenant-a', body: floodSecret(i) });
            if (i % 40 === 39) samples.push(`${i + 1}: ${(await heapMiB()).toFixed(0)}`);
          }
        }),
      );
    } finally {
      t.diagnostic(
        `requestor heap used (MiB) while the tenant created them: 0: ${heapBefore.toFixed(0)}, ${samples.join(', ')}`,
      );
    }
    await until(
      'a refusal of every flood Secret',
      async () => (await metric('wiw_token_requestor_refusals_total')) >= FLOOD || undefined,
      60_000,
    );
    await tenant.createNamespacedSecret({
      namespace: 'tenant-a',
      body: labelledSecret('aws', { name: 'ordinary', namespace: 'tenant-a' }),
    });
    await tokenOf('ordinary');
    const heapAfter = await heapMiB();
    const rss = rssMiB(requestor.process.pid);
    t.diagnostic(
      `heap used ${heapBefore.toFixed(1)} -> ${heapAfter.toFixed(1)} MiB; RSS ${rss.rss.toFixed(0)} MiB (peak ${rss.hwm.toFixed(0)}); cgroup peak ${cgroup.peakMiB().toFixed(0)} MiB`,
    );
    const events = await admin.listNamespacedEvent({
      namespace: 'tenant-a',
      fieldSelector: 'involvedObject.name=flood-7',
    });
    // Admission's own message (the size of `config` and its bound), as the webhook would refuse it.
    assert.deepEqual(
      events.items.map((e) => `${e.reason}: ${e.message}`),
      [`TokenRefused: no token issued: the Secret cannot be read: ${secretShapeError(floodSecret(7))}`],
    );
    assert.match(
      events.items[0].message!,
      /data\.config is \d+ characters of base64, more than the 87384 of 65536 bytes/,
    );
    assert.equal((await admin.readNamespacedSecret({ namespace: 'tenant-a', name: 'flood-7' })).data?.token, undefined);
    // Flat: the flood's 176 MB are garbage once each Secret is read (kept, they were 1.1 MB a
    // Secret, and V8 ran out of heap before the 160th).
    const settled = await settledHeap(heapBefore + 12);
    t.diagnostic(`heap used once collected: ${settled.heap.toFixed(1)} MiB (after ${settled.secrets} more Secrets)`);

    // A restart lists them all (streamed, one at a time) and keeps serving.
    await requestor.stop();
    await startRequestor();
    await until(
      'the restarted requestor to track every Secret',
      async () => (await metric('wiw_token_requestor_secrets')) >= FLOOD + 1 || undefined,
      60_000,
    );
    const heapRestarted = await heapMiB();
    t.diagnostic(
      `after a restart: heap used ${heapRestarted.toFixed(1)} MiB, cgroup peak ${cgroup.peakMiB().toFixed(0)} MiB`,
    );
    const settledAgain = await settledHeap(heapBefore + 12);
    t.diagnostic(
      `after a restart, once collected: ${settledAgain.heap.toFixed(1)} MiB (${settledAgain.secrets} more Secrets)`,
    );
    await tenant.createNamespacedSecret({
      namespace: 'tenant-a',
      body: labelledSecret('aws', { name: 'after-restart', namespace: 'tenant-a' }),
    });
    await tokenOf('after-restart');
    assert.equal(cgroup.oomKills(), 0, 'OOM kills in the cgroup');
  });
});
