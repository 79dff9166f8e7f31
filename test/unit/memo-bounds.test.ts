// Issue 28, finding 2: the mutation core keeps nothing a Pod carries. A forged injection record
// (~236 KB), a container's own AWS_ROLE_ARN or AZURE_FEDERATED_TOKEN_FILE (MBs) and long container
// names were stringified and kept in memo maps, so a few hundred dryRun Pods ran the heap out. Here
// each Pod carries a value of its own, never seen before, and the heap retained after a garbage
// collection must stay flat.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { MAX_MEMO_BYTES, MAX_MEMO_KEY } from '../../src/bounds.ts';
import { ByteMemo } from '../../src/mutate/byte-memo.ts';
import { INJECTED_ANNOTATION, RecordKeys } from '../../src/mutate/injection-record.ts';
import { mutatePod } from '../../src/mutate/pod.ts';
import type { Pod } from '../../src/kube/types.ts';
import { pod, providers, sa } from '../support/builders.ts';
import { CLIENT, ROLE_ARN, TENANT } from '../support/identities.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const keys = RecordKeys.random();
const all = providers();
const SA = sa({
  'eks.amazonaws.com/role-arn': ROLE_ARN,
  'azure.workload.identity/client-id': CLIENT,
  'azure.workload.identity/tenant-id': TENANT,
});

/** Heap retained after `rounds` admissions of the Pods `make` builds, less the heap before. */
function retained(rounds: number, make: (i: number) => Pod): number {
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < rounds; i++) {
    const r = mutatePod(all, { pod: make(i), namespace: 'team-a', serviceAccount: SA, recordKeys: keys });
    assert.ok(r.allowed, r.allowed ? '' : r.denial.message);
  }
  gc();
  return process.memoryUsage().heapUsed - before;
}

const MiB = 1024 * 1024;
/** A string of `n` characters unique to round `i` (V8 keeps flat one-byte strings: n bytes). */
const unique = (i: number, n: number) => `${i}-`.padEnd(n, 'x');

describe('the mutation core keeps no value a Pod carries (issue 28, finding 2)', () => {
  test('forged injection records of ~236 KB: the heap stays flat across 300 Pods', () => {
    const forged = (i: number) =>
      JSON.stringify({
        v: 2,
        sa: 'app',
        env: [[unique(i, 236_000), 'AAAAAAAAAAAAAAAA']],
        vol: [],
        ann: [],
        keep: [],
        mac: 'forged',
      });
    const grown = retained(300, (i) => pod({ annotations: { [INJECTED_ANNOTATION]: forged(i) } }));
    // On 34d7c0c each record's stringification stayed in the MAC memo: ~70 MB here.
    assert.ok(grown < 16 * MiB, `the heap grew by ${(grown / MiB).toFixed(1)} MiB`);
  });

  test("a container's own AWS_ROLE_ARN and AZURE_FEDERATED_TOKEN_FILE of 256 KB: flat across 200 Pods", () => {
    const grown = retained(200, (i) =>
      pod({
        labels: { 'azure.workload.identity/use': 'true' },
        spec: {
          containers: [
            {
              name: 'app',
              image: 'busybox',
              env: [
                { name: 'AWS_ROLE_ARN', value: unique(i, 256_000) },
                { name: 'AZURE_FEDERATED_TOKEN_FILE', value: unique(i, 256_000) },
              ],
            },
          ],
        },
      }),
    );
    // On 34d7c0c each value stayed in the digest memo: ~100 MB here.
    assert.ok(grown < 16 * MiB, `the heap grew by ${(grown / MiB).toFixed(1)} MiB`);
  });

  test('containers that set the injected values themselves, under long names: flat across 200 Pods', () => {
    // The user's own copy of a value the webhook adds is recorded under the container's name, so
    // the names reach the record the webhook signs.
    const grown = retained(200, (i) =>
      pod({
        labels: { 'azure.workload.identity/use': 'true' },
        spec: {
          containers: Array.from({ length: 8 }, (_, c) => ({
            name: unique(i * 8 + c, 32_000),
            image: 'busybox',
            env: [{ name: 'AZURE_CLIENT_ID', value: CLIENT }],
          })),
        },
      }),
    );
    // On 34d7c0c each signed record's stringification (~256 KB of names) stayed in the MAC memo.
    assert.ok(grown < 16 * MiB, `the heap grew by ${(grown / MiB).toFixed(1)} MiB`);
  });
});

describe('ByteMemo, the memos of the mutation core', () => {
  test('keeps no key over its size, and never more bytes than its budget', () => {
    const memo = new ByteMemo(64 * 1024, 1024);
    memo.set('x'.repeat(1025), 'd');
    assert.equal(memo.get('x'.repeat(1025)), undefined, 'a key over 1024 characters is not kept');
    for (let i = 0; i < 10_000; i++) {
      memo.set(unique(i, 1000), 'digest');
      assert.ok(memo.bytes <= 64 * 1024, `${memo.bytes} bytes after ${i + 1} keys`);
    }
    assert.equal(memo.get(unique(9999, 1000)), 'digest', 'the latest key is kept');
  });

  test('the defaults are the bounds docs/hardening.md states', () => {
    const memo = new ByteMemo();
    assert.equal(memo.maxBytes, MAX_MEMO_BYTES);
    assert.equal(memo.maxKey, MAX_MEMO_KEY);
  });
});
