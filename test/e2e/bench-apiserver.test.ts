// The documented command `npm run bench:apiserver` (scripts/dev.sh bench-apiserver) runs end to
// end on a tiny setting: `serve` registered with a real kube-apiserver at a non-loopback address
// of this host (as behind a Service: kube-apiserver offers HTTP/1.1 alone), dry-run Pods created
// through it, the figures printed, and the two-replica spread run; with --corpus charts (real
// charts' Pods, in their namespaces) and the patch phase (serve's JSON Patch against the whole-array
// one, applied with kube-apiserver's json-patch), and the floor and the core (the floor answering
// with serve's admission core) as servers of their own; each warmed
// by a few creates first. It judges no figure (a benchmark prints them):
// only that every part ran and printed its row, and that both patches gave the same Pod.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { test } from 'node:test';

const ROOT = resolve(import.meta.dirname, '../..');

/** The patch table's row for a cloud, its figures parsed. */
function patchRow(stdout: string, cloud: 'AWS' | 'Azure') {
  const n = '([\\d.,]+)';
  const row = new RegExp(
    `^\\| charts, ${cloud} \\(${n} of ${n}\\) \\| ${n} µs \\(${n} ops, ${n} B\\) \\| ${n} µs \\(${n} ops, ${n} B\\) \\| ${n}x \\| yes, ${n} of ${n} \\|$`,
    'm',
  ).exec(stdout);
  assert.ok(row, `a patch row for charts, ${cloud}, both patches giving the same Pod:\n${stdout}`);
  const [patched, of, serveUs, serveOps, , wholeUs, wholeOps, , ratio, same, compared] = row
    .slice(1)
    .map((x) => Number(x.replaceAll(',', '')));
  return { patched, of, serveUs, serveOps, wholeUs, wholeOps, ratio, same, compared };
}

test('bench:apiserver runs end to end on a tiny setting and prints its tables', () => {
  const run = spawnSync(
    'bash',
    [
      'scripts/dev.sh',
      'bench-apiserver',
      ...['--rates', '20', '--seconds', '1', '--warm', '1', '--servers', 'none,serve,floor,core'],
      ...['--warm-reviews', '40', '--idle-seconds', '1'],
      ...['--spread-rate', '20', '--spread-seconds', '2', '--spread-age', '1'],
      ...['--corpus', 'charts', '--phases', 'rates,spread,patch', '--patch-rounds', '1'],
    ],
    { cwd: ROOT, encoding: 'utf8', timeout: 600_000 },
  );
  const out = `${run.stdout}\n${run.stderr}`;
  assert.equal(run.status, 0, out.slice(-3000));
  // The rate table: the baseline and serve, its protocol, connections, kube-apiserver's figures.
  assert.match(run.stdout, /^\| 20 \(\d+\) \| no webhook \(AWS\) \| – \|/m);
  const serve =
    /^\| 20 \(\d+\) \| serve \(AWS\) \| (h2|http\/1\.1) \| (\d+) \(\d+\) \| ([\d.,]+) \/ [\d.,]+ \/ [\d.,]+ \|.*\| ([\d,]+) µs \(idle [\d.,]+ ms\/s\) \| (\d+) \|$/m.exec(
      run.stdout,
    );
  assert.ok(serve, `a row for serve with every figure:\n${run.stdout}`);
  assert.equal(serve[1], 'http/1.1', 'kube-apiserver speaks HTTP/1.1 to a webhook not on loopback');
  // The floor: registered and called like the webhooks (it patches nothing), its CPU counted.
  assert.match(
    run.stdout,
    /^\| 20 \(\d+\) \| floor \(bare Node\) \(AWS\) \| http\/1\.1 \| \d+ \(\d+\) \| [\d.,]+ \/ .*\| [\d,]+ µs \(idle [\d.,]+ ms\/s\) \| 0 \|$/m,
  );
  // The core: registered once its answer mutated the probe Pod (as serve's), its CPU counted.
  assert.match(
    run.stdout,
    /^\| 20 \(\d+\) \| core \(floor \+ serve's admission\) \(AWS\) \| http\/1\.1 \| \d+ \(\d+\) \| [\d.,]+ \/ .*\| [\d,]+ µs \(idle [\d.,]+ ms\/s\) \| 0 \|$/m,
  );
  assert.match(run.stdout, /each webhook first warmed by 40 creates/);
  assert.ok(Number(serve[2]) >= 1, 'the webhook accepted a connection');
  // The spread over two replicas: both settings, each with reviews counted per replica.
  for (const setting of ['HTTP/1.1, no connection age', 'HTTP/1.1, --max-connection-age-seconds 1'])
    assert.match(
      run.stdout,
      new RegExp(
        `^\\| ${setting.replace(/[/.]/g, '\\$&')}[^|]* \\| [\\d,]+ \\(\\d+ %\\) / [\\d,]+ \\(\\d+ %\\) \\|`,
        'm',
      ),
    );
  assert.match(run.stdout, /^bench:apiserver on \d+ CPUs/m, 'the header names the machine');
  assert.match(
    run.stdout,
    /^ {2}webhooks registered at https:\/\/(?!127\.)[\d.]+: kube-apiserver offers http\/1\.1 \(not loopback/m,
    'the header names the address and what kube-apiserver offers there',
  );
  assert.doesNotMatch(run.stdout, /^\| HTTP\/2/m, 'no h2 row without --localhost');
  // The corpus: named, with each stream's sizes.
  assert.match(run.stdout, /^ {2}Pods: --corpus charts, real charts' Pods/m);
  for (const cloud of ['AWS', 'Azure'])
    assert.match(
      run.stdout,
      new RegExp(
        `^ {4}charts, ${cloud}: \\d+ Pods \\(\\d+ to be mutated\\), [\\d.]+ to [\\d.]+ KB, mean [\\d.]+, median [\\d.]+$`,
        'm',
      ),
    );
  // The patch phase: the json-patch kube-apiserver applies with, then both patches per cloud.
  assert.match(
    run.stdout,
    /^ {2}patch: gopkg\.in\/evanphx\/json-patch\.v4 v4\.\d+\.\d+ \(k8s\.io\/apiserver v0\.\d+\.\d+'s pin\)/m,
  );
  for (const cloud of ['AWS', 'Azure'] as const) {
    const r = patchRow(run.stdout, cloud);
    assert.ok(r.patched >= 1 && r.patched <= r.of, `${cloud}: some Pods patched, of the stream's`);
    assert.equal(r.same, r.patched, `${cloud}: every patched Pod compared`);
    assert.equal(r.compared, r.patched);
    assert.ok(r.serveUs > 0 && r.wholeUs > 0 && r.serveOps >= 1 && r.wholeOps >= 1, JSON.stringify(r));
    assert.ok(
      Math.abs(r.ratio - r.serveUs / r.wholeUs) <= 0.01 * r.ratio + 0.01,
      `${cloud}: the ratio is of the two figures`,
    );
  }
});

test('bench:apiserver --servers policy: the policy mode on kube-apiserver 1.36 beside serve, with its plugin time and CPU', () => {
  const run = spawnSync(
    'bash',
    [
      'scripts/dev.sh',
      'bench-apiserver',
      ...['--rates', '20', '--seconds', '1', '--warm', '1', '--servers', 'serve,policy', '--phases', 'rates'],
    ],
    { cwd: ROOT, encoding: 'utf8', timeout: 600_000 },
  );
  const out = `${run.stdout}\n${run.stderr}`;
  assert.equal(run.status, 0, out.slice(-3000));
  assert.match(run.stdout, /^ {2}kube-apiserver v1\.3[6-9]\.\d+/m, 'the policy needs kube-apiserver 1.36 or newer');
  // Both rows: kube-apiserver's time for each (the webhook's, the policy plugin's), its CPU per Pod.
  for (const server of ['serve', 'policy \\(MAP\\)'])
    assert.match(
      run.stdout,
      new RegExp(
        `^\\| 20 \\(\\d+\\) \\| ${server} \\(AWS\\) \\|.*\\| [\\d.,]+ / [\\d.,]+ / [\\d.,]+ \\| [\\d.,]+ / [\\d.,]+ \\| [\\d,]+ µs \\|.* 0 \\|$`,
        'm',
      ),
      run.stdout,
    );
});
