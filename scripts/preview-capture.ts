// Captures `preview` and `check-policy` output of one checkout for every input of the comparison
// (scripts/preview-compare.sh): each file of examples/, each peer fixture (its ServiceAccount, Pod
// and flags), and the Pod examples judged by the policies of scripts/preview-compare/ (in
// namespace-demo's namespace). Inputs come
// from this checkout, so two checkouts are compared on the same files.
//   node scripts/preview-capture.ts CHECKOUT OUTDIR
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parse, stringify } from 'yaml';

const [checkout, outDir] = process.argv.slice(2);
if (!checkout || !outDir) {
  process.stderr.write('usage: node scripts/preview-capture.ts CHECKOUT OUTDIR\n');
  process.exit(2);
}
const ROOT = new URL('..', import.meta.url).pathname;
const CLI = join(checkout, 'src/cli.ts');
const inputs = join(outDir, 'inputs');
mkdirSync(inputs, { recursive: true });

function capture(name: string, args: string[]): void {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { PATH: process.env.PATH },
  });
  // Paths of this checkout's inputs appear in messages: one spelling for both sides.
  const clean = (s: string) => s.replaceAll(ROOT, '<root>/').replaceAll(outDir, '<out>');
  writeFileSync(
    join(outDir, `${name}.txt`),
    `exit ${r.status}\n--- stdout\n${clean(r.stdout)}--- stderr\n${clean(r.stderr)}`,
  );
}

const files = (dir: string) =>
  readdirSync(join(ROOT, dir))
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => join(dir, f));
const examples = [...files('examples'), ...files('examples/secrets')];
const policies = files('scripts/preview-compare');
const NAMESPACE = 'scripts/preview-compare/objects/namespace-demo.yaml';

for (const file of examples) {
  const name = file.replaceAll('/', '_').replace(/\.yaml$/, '');
  for (const output of ['yaml', 'patch']) capture(`${name}.${output}`, ['preview', '-f', file, '-o', output]);
  const isPod = readFileSync(join(ROOT, file), 'utf8').includes('\nkind: Pod');
  if (isPod && !file.startsWith('examples/secrets/'))
    for (const policy of policies)
      capture(`${name}.policy-${basename(policy, '.yaml')}`, [
        'preview',
        '-f',
        file,
        '-f',
        NAMESPACE,
        '--policy',
        policy,
        '-o',
        'patch',
      ]);
}
for (const policy of policies) capture(`check-policy_${basename(policy, '.yaml')}`, ['check-policy', '-f', policy]);
capture('check-policy_chart-starter', [
  'check-policy',
  '-f',
  'charts/workload-identity-webhook/files/policies/namespace-labels.yaml',
]);

interface Fixture {
  flags?: Record<string, string>;
  serviceAccount?: unknown;
  pod: unknown;
}
const peers = join(ROOT, 'test/fixtures/peers');
for (const peer of readdirSync(peers).sort()) {
  for (const file of readdirSync(join(peers, peer)).sort()) {
    if (!file.endsWith('.yaml')) continue;
    const fixture = parse(readFileSync(join(peers, peer, file), 'utf8')) as Fixture;
    const input = join(inputs, `${peer}_${file}`);
    writeFileSync(
      input,
      [fixture.serviceAccount, fixture.pod]
        .filter(Boolean)
        .map((d) => stringify(d))
        .join('---\n'),
    );
    const flags = Object.entries(fixture.flags ?? {}).map(([k, v]) => `--${k}=${v}`);
    capture(`peer_${peer}_${file.replace(/\.yaml$/, '')}`, ['preview', '-f', input, '-o', 'patch', ...flags]);
  }
}
