// The demo's summary (scripts/demo-summary.ts) names everything the webhook adds to each example
// Pod: the Pods are mutated by the same core as the webhook (preview), and the summary is checked
// against the difference, whatever it holds (pfnet's gcloud-setup init container was once left out).
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { createProviders } from '../../src/clouds/index.ts';
import { loadConfig } from '../../src/config.ts';
import { previewPod } from '../../src/commands/preview.ts';
import { describeInjection, kubectlHint, shellQuote } from '../../scripts/demo-summary.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../examples');
const providers = createProviders(loadConfig(new Map([['aws-default-region', 'eu-west-1']]), {}));

function admitted(file: string): { written: V1Pod; admitted: V1Pod } {
  const text = readFileSync(join(EXAMPLES, file), 'utf8');
  const written = parseAllDocuments(text)
    .map((d) => d.toJS() as V1Pod)
    .find((d) => d?.kind === 'Pod')!;
  const result = previewPod(providers, { documents: [{ source: file, text }] }, 'json');
  assert.ok(result.allowed, `${file} is admitted`);
  return { written, admitted: JSON.parse(result.output) as V1Pod };
}

const files = readdirSync(EXAMPLES).filter(
  (f) => f.endsWith('.yaml') && readFileSync(join(EXAMPLES, f), 'utf8').includes('kind: Pod'),
);

test('the examples hold Pods of every cloud', () => {
  assert.ok(files.length >= 4, files.join(', '));
});

for (const file of files) {
  test(`examples/${file}: the summary names every volume, container, mount and variable the webhook added`, () => {
    const { written, admitted: pod } = admitted(file);
    const summary = describeInjection(written, pod).join('\n');
    const had = (list: { name: string }[] | undefined) => new Set((list ?? []).map((x) => x.name));
    const volumes = had(written.spec?.volumes);
    for (const v of pod.spec?.volumes ?? [])
      if (!volumes.has(v.name)) assert.match(summary, new RegExp(`^volume ${v.name}: `, 'm'), summary);
    for (const kind of ['initContainers', 'containers'] as const) {
      const label = kind === 'initContainers' ? 'init container' : 'container';
      const before = new Map((written.spec?.[kind] ?? []).map((c) => [c.name, c]));
      for (const c of pod.spec?.[kind] ?? []) {
        const was = before.get(c.name);
        if (!was) assert.match(summary, new RegExp(`^${label} ${c.name} added \\(image `, 'm'), summary);
        const block = containerBlock(summary, label, c.name);
        const env = had(was?.env);
        for (const e of c.env ?? []) if (!env.has(e.name)) assert.match(block, new RegExp(`env ${e.name}=`), summary);
        const mounts = new Set((was?.volumeMounts ?? []).map((m) => m.mountPath));
        for (const m of c.volumeMounts ?? [])
          if (!mounts.has(m.mountPath)) assert.ok(block.includes(`mount ${m.name} at ${m.mountPath}`), summary);
      }
    }
  });
}

/** The lines of one container in the summary. */
function containerBlock(summary: string, label: string, name: string): string {
  const lines = summary.split('\n');
  const start = lines.findIndex((l) => l === `${label} ${name}` || l.startsWith(`${label} ${name} added `));
  if (start === -1) return '';
  const end = lines.findIndex((l, i) => i > start && !l.startsWith('  '));
  return lines.slice(start, end === -1 ? undefined : end).join('\n');
}

test("pfnet's gcloud mode: the gcloud-setup init container is in the summary", () => {
  const { written, admitted: pod } = admitted('gcp.yaml');
  assert.ok(pod.spec?.initContainers?.some((c) => c.name === 'gcloud-setup'));
  assert.ok(describeInjection(written, pod).some((l) => /^init container gcloud-setup added \(image /.test(l)));
});

test('a Pod the webhook leaves alone: nothing injected', () => {
  const { written, admitted: pod } = admitted('opted-out.yaml');
  assert.deepEqual(describeInjection(written, pod), ['nothing injected']);
});

test('the kubectl the demo suggests exists: the built one, else one on PATH, else how to build it', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wiw-kubectl-'));
  try {
    const kubectl = join(dir, 'my kubectl');
    writeFileSync(kubectl, '#!/bin/sh\n', { mode: 0o755 });
    assert.equal(
      kubectlHint({ TEST_ASSET_KUBECTL: kubectl, PATH: '' }),
      `  alias kubectl='${kubectl}'   # built with kube-apiserver, at its version`,
    );
    writeFileSync(join(dir, 'kubectl'), '#!/bin/sh\n', { mode: 0o755 });
    assert.match(kubectlHint({ TEST_ASSET_KUBECTL: join(dir, 'absent'), PATH: dir }), /the one on your PATH/);
    assert.match(kubectlHint({ PATH: '/nonexistent' }), /scripts\/dev\.sh ensure-binaries/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('shellQuote: plain words as they are, anything else single-quoted', () => {
  assert.equal(shellQuote('/root/.cache/x/kubectl'), '/root/.cache/x/kubectl');
  assert.equal(shellQuote("/tmp/a b'$(x)"), `'/tmp/a b'\\''$(x)'`);
});
