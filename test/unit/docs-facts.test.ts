// The docs' facts that need no process to check, held to their sources: every upstream issue or PR
// the docs cite is a link to it; every link into the docs lands on a heading; a measured figure
// (the image's size, a build or set-up time) is written in docs/figures.md only; the README's
// supported versions and architectures are what the chart, the tests and the release use; its
// migration table names only differences docs/compatibility.md lists; its contributors' section
// holds the two set-up commands. (test/e2e/docs-facts.test.ts checks the facts that need helm or
// a running `serve`.)
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { createProviders } from '../../src/clouds/index.ts';
import { loadConfig } from '../../src/config.ts';
import { previewPod } from '../../src/commands/preview.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
const DOCS = [
  'README.md',
  'test/README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** A Markdown section: from its heading to the next heading of the same or a higher level. */
function section(file: string, heading: string): string {
  const text = read(file);
  const start = text.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `${file} has the heading "${heading}"`);
  const level = /^#+/.exec(heading)![0].length;
  const rest = text.slice(start + heading.length + 2);
  const end = rest.search(new RegExp(`^#{1,${level}} `, 'm'));
  return end < 0 ? rest : rest.slice(0, end);
}

/** What the docs link to: the docs, and the chart README (generated from values.yaml). */
const LINKED = [...DOCS, 'charts/workload-identity-webhook/README.md'];

// ---- upstream issues ----

const PEERS: Record<string, string> = {
  AWS: 'aws/amazon-eks-pod-identity-webhook',
  Azure: 'Azure/azure-workload-identity',
  pfnet: 'pfnet-research/gcp-workload-identity-federation-webhook',
};
const LINK = /\[([^\]]*)\]\(([^)\s]*)\)/g;

/** Problems with a text's `#NNN` references: each must be a link to that peer's issue or PR of that number. */
function issueReferenceProblems(text: string): string[] {
  const problems: string[] = [];
  for (const [, label, url] of text.matchAll(LINK)) {
    const ref = /^(?:(AWS|Azure|pfnet) )?(PR )?#(\d+)$/.exec(label);
    if (!ref) {
      if (/#\d/.test(label)) problems.push(`link text "${label}" is not "<peer> #N" or "<peer> PR #N"`);
      continue;
    }
    const [, peer, pr, number] = ref;
    const target = /^https:\/\/github\.com\/([^/]+\/[^/]+)\/(issues|pull)\/(\d+)$/.exec(url);
    const repo = target?.[1];
    if (!target || !Object.values(PEERS).includes(repo!)) problems.push(`${label}: ${url} is no peer's issue or PR`);
    else if (peer && PEERS[peer] !== repo) problems.push(`${label}: ${url} is not ${PEERS[peer]}`);
    else if (target[3] !== number) problems.push(`${label}: ${url} is another number`);
    else if ((target[2] === 'pull') !== Boolean(pr))
      problems.push(`${label}: ${url} (a PR is /pull/, an issue /issues/)`);
  }
  const unlinked = text.replace(LINK, '').match(/(?<![\w/&])#\d+\b/g) ?? [];
  for (const ref of unlinked) problems.push(`${ref} is not a link`);
  return problems;
}

describe("references to the peers' issues and PRs", () => {
  test("every #NNN in README.md and docs/ is a link to that peer's issue or PR", () => {
    let links = 0;
    for (const file of DOCS) {
      const text = read(file);
      links += [...text.matchAll(LINK)].filter(([, label]) => /#\d+$/.test(label)).length;
      assert.deepEqual(issueReferenceProblems(text), [], file);
    }
    assert.ok(links >= 10, `${links} links to upstream issues`);
  });

  test('the reader refuses what it should', () => {
    const aws = 'https://github.com/aws/amazon-eks-pod-identity-webhook';
    assert.deepEqual(issueReferenceProblems(`[AWS #248](${aws}/issues/248), see install.md#5-migrating`), []);
    assert.equal(issueReferenceProblems('Region and `envFrom` (AWS #248)').length, 1);
    assert.equal(issueReferenceProblems('AWS #149 and #238').length, 2);
    assert.equal(issueReferenceProblems(`[AWS #248](${aws}/issues/249)`).length, 1);
    assert.equal(issueReferenceProblems(`[Azure #408](${aws}/issues/408)`).length, 1);
    assert.equal(issueReferenceProblems(`[pfnet PR #138](${aws}/pull/138)`).length, 1);
    assert.equal(issueReferenceProblems(`[AWS PR #20](${aws}/issues/20)`).length, 1);
  });
});

// ---- links into the docs ----

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const slug = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, heading] of read(file)
    .replace(/^```[\s\S]*?^```$/gm, '')
    .matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(heading);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}

test('every link from README.md and docs/ to a Markdown file of the repository lands on a file and heading', () => {
  const problems: string[] = [];
  let checked = 0;
  for (const file of DOCS) {
    for (const [, , url] of read(file).matchAll(LINK)) {
      if (/^[a-z]+:/.test(url)) continue;
      const [path, anchor] = url.split('#');
      const target = path ? normalize(join(dirname(file), path)) : file;
      if (!target.endsWith('.md')) continue;
      checked++;
      if (!LINKED.includes(target)) problems.push(`${file}: ${url} (no ${target})`);
      else if (anchor && !anchors(target).has(anchor)) problems.push(`${file}: ${url} (no such heading in ${target})`);
    }
  }
  assert.ok(checked > 30, `${checked} links`);
  assert.deepEqual(problems, []);
});

// ---- measured figures: one file ----

/** Sentences of a Markdown file (code blocks left out) that state an image size or a build or set-up time. */
function figureStatements(text: string): string[] {
  const prose = text.replace(/^```[\s\S]*?^```$/gm, '');
  const size = /\b\d[\d,.]* ?[MG]B\b/;
  const duration = /\b\d[\d,.]*(-\d+)? ?(s|min)\b/;
  const rows = prose.split('\n').filter((l) => l.startsWith('|'));
  const sentences = prose
    .split('\n')
    .filter((l) => !l.startsWith('|'))
    .join('\n')
    .replace(/\s*\n\s*/g, ' ')
    .split(/(?<=[.!?])\s+(?=[A-Z`(*[])/);
  return [...rows, ...sentences].filter(
    (s) =>
      (size.test(s) && /\bimages?\b/i.test(s)) ||
      (duration.test(s) && /\b(built|builds?|building|ready after|first run)\b/i.test(s)),
  );
}

describe('measured figures live in docs/figures.md', () => {
  test('no other Markdown file states the image size or a build or set-up time', () => {
    for (const file of DOCS.filter((f) => f !== 'docs/figures.md'))
      assert.deepEqual(figureStatements(read(file)), [], `${file} repeats a figure of docs/figures.md: link to it`);
  });

  test('docs/figures.md holds them, and the statements the reader catches are the ones that disagreed', () => {
    assert.ok(figureStatements(read('docs/figures.md')).length >= 5);
    // The sentences of 34d7c0c that disagreed with docs/node.md.
    for (const old of [
      "the kubelet, controller-manager and scheduler build from Go modules once (67 s measured, after kube-apiserver filled Go's build cache)",
      'the images are built locally without a registry (94 s measured the first time).',
      '| image, uncompressed | 124 MB | | |',
      'The webhook image is 121 MB uncompressed on amd64.',
    ])
      assert.equal(figureStatements(old).length, 1, old);
  });
});

// ---- the README's facts ----

describe("README's supported versions and architectures", () => {
  const text = section('README.md', '### Supported Kubernetes versions and architectures').replace(/\s*\n\s*/g, ' ');

  test('the tested version is the one scripts/provide-binaries.sh builds for every e2e test', () => {
    const pinned = /^K8S_VERSION=\$\{K8S_VERSION:-v(\d+\.\d+)\.(\d+)\}/m.exec(read('scripts/provide-binaries.sh'))!;
    assert.ok(pinned, 'scripts/provide-binaries.sh pins K8S_VERSION');
    assert.match(text, new RegExp(`Tested on\\*\\* Kubernetes ${pinned[1].replace('.', '\\.')}:`));
    assert.ok(text.includes(`v${pinned[1]}.${pinned[2]}`), `names v${pinned[1]}.${pinned[2]}`);
  });

  test("the supported range is the chart's kubeVersion floor to the newest version the suite runs, both run", () => {
    const script = read('scripts/provide-binaries.sh');
    const pinned = (name: string) => {
      const m = new RegExp(`^${name}=\\$\\{${name}:-v(\\d+\\.\\d+)\\.(\\d+)\\}`, 'm').exec(script)!;
      assert.ok(m, `scripts/provide-binaries.sh pins ${name}`);
      return { minor: m[1], full: `v${m[1]}.${m[2]}` };
    };
    const oldest = pinned('K8S_OLDEST_VERSION');
    const newest = pinned('K8S_NEWEST_VERSION');
    const kubeVersion = /^kubeVersion: "(.*)"$/m.exec(read('charts/workload-identity-webhook/Chart.yaml'))![1];
    assert.equal(kubeVersion, `>=${oldest.minor}.0-0`, 'the floor is the oldest version the suite runs');
    assert.ok(text.includes(`\`kubeVersion: ${kubeVersion}\``), kubeVersion);
    assert.ok(text.includes(`**Supported: Kubernetes ${oldest.minor} to ${newest.minor}.**`), text);
    for (const v of [oldest.full, newest.full]) assert.ok(text.includes(v), `the README names ${v}`);
    // The range is stated once: no other bullet names a floor of its own.
    assert.equal(text.match(/Supported:/g)?.length, 1);
  });

  test('the versions selection the README names is the one scripts/dev.sh test runs on both ends', () => {
    const dev = read('scripts/dev.sh');
    assert.match(dev, /^\s+test_version oldest \|\| status=\$\?$/m);
    assert.match(dev, /^\s+test_version newest \|\| status=\$\?$/m);
    const selection = /^VERSIONS_SELECTION=\(\n([^)]*)\)/m.exec(dev)![1].trim().split(/\s+/);
    const listed = section('test/README.md', '## Kubernetes versions').match(/`test\/e2e\/[\w.-]+\.test\.ts`/g)!;
    assert.deepEqual(listed.map((f) => f.slice(1, -1)).sort(), [...selection].sort());
    for (const file of selection) assert.ok(read(file).length > 0, file);
  });

  test('the architectures are the ones the release builds', () => {
    const platforms = /PLATFORMS = \[([^\]]*)\]/.exec(read('scripts/release.ts'))![1].match(/linux\/\w+/g)!;
    assert.ok(platforms.length >= 2);
    const named = text.match(/linux\/\w+/g)!;
    assert.deepEqual([...new Set(named)].sort(), [...platforms].sort());
  });
});

test("README's migration table: a row per peer, and every difference it names is a row of docs/compatibility.md", () => {
  const table = section('README.md', '## Migrating from a single-cloud webhook');
  const rows = table.split('\n').filter((l) => /^\| [\w-]+\/[\w-]+ \|/.test(l));
  assert.deepEqual(
    rows.map((r) => r.split(' | ')[0].slice(2)),
    Object.values(PEERS),
  );
  const listed = new Set(
    [...section('docs/compatibility.md', '## Differences that remain').matchAll(/^\| `([a-z0-9-]+)` \|/gm)].map(
      (m) => m[1],
    ),
  );
  assert.ok(listed.size > 20);
  const named = [...table.matchAll(/\(`([a-z0-9-]+)`(?:, `([a-z0-9-]+)`)?\)/g)].flatMap((m) =>
    m.slice(1).filter(Boolean),
  );
  assert.ok(named.length >= 15, `${named.length} differences named`);
  for (const id of named) assert.ok(listed.has(id), `${id} is a row of docs/compatibility.md`);
});

test("the two set-up commands, verbatim, in the contributors' section before the first install step", () => {
  const readme = read('README.md');
  const contributors = section('README.md', '## For contributors: two commands');
  assert.ok(readme.indexOf('## For contributors') < readme.indexOf('## Install'), 'near the top');
  const commands = /```sh\n([\s\S]*?)```/.exec(contributors)![1];
  assert.match(commands, /^npm run demo +# /m);
  assert.match(commands, /^npm test +# /m);
  assert.ok(read('docs/development.md').includes(commands), 'docs/development.md gives the same two lines');
  // Each is the package.json script that calls scripts/dev.sh.
  const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
  assert.equal(scripts.demo, 'bash scripts/dev.sh demo');
  assert.equal(scripts.test, 'bash scripts/dev.sh test');
});

test("README's glossary defines the project's words the README uses", () => {
  const glossary = section('README.md', '## Glossary');
  const body = read('README.md').replace(glossary, '');
  const defined = [...glossary.matchAll(/^- \*\*([^*]+)\*\*/gm)].map((m) => m[1]);
  for (const term of ['Peer webhook', 'Annotation dialect', 'GEP-26', 'Tenant policy', 'Injection record'])
    assert.ok(defined.includes(term), `the glossary defines ${term}`);
  for (const word of ['peer', 'dialect', 'GEP-26'])
    assert.match(body, new RegExp(`\\b${word}\\b`), `the README uses "${word}", which the glossary defines`);
});

describe("README's quickstart: what it says the Pod gets is what the webhook makes", () => {
  const providers = createProviders(loadConfig(new Map(), {}));
  interface Made {
    spec: {
      containers: { env?: { name: string; value?: string }[]; volumeMounts?: { name: string; mountPath: string }[] }[];
      volumes: {
        name: string;
        projected?: { sources: { serviceAccountToken?: { audience: string; expirationSeconds: number } }[] };
      }[];
    };
  }

  /** The Pod `serve` makes for a Pod of the section's ServiceAccount (with the label the section names). */
  function made(text: string): Made {
    const sa = parse(/```yaml\n([\s\S]*?)```/.exec(text)![1]) as { metadata: { name: string; namespace: string } };
    const label = /the label `([^:`]+): "([^"]+)"`/.exec(text);
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'app', namespace: sa.metadata.namespace, labels: label ? { [label[1]]: label[2] } : {} },
      spec: { serviceAccountName: sa.metadata.name, containers: [{ name: 'app', image: 'app' }] },
    };
    const documents = [{ source: 'README', text: `${JSON.stringify(sa)}\n---\n${JSON.stringify(pod)}` }];
    const r = previewPod(providers, { documents }, 'json');
    if (!r.allowed) assert.fail(`the quickstart's Pod is denied: ${r.denial.message}`);
    return JSON.parse(r.output) as Made;
  }

  for (const heading of [
    '### AWS (IAM Roles for Service Accounts)',
    '### Azure (Microsoft Entra Workload ID)',
    '### GCP (Workload Identity Federation)',
  ])
    test(heading.slice(4), () => {
      const text = section('README.md', heading);
      const prose = text.replace(/```[\s\S]*?```/g, '').replace(/\s*\n\s*/g, ' ');
      const pod = made(text);
      const [container] = pod.spec.containers;
      const env = new Map((container.env ?? []).map((e) => [e.name, e.value ?? '']));
      const mounts = (container.volumeMounts ?? []).map((m) => m.mountPath);
      const tokens = pod.spec.volumes.flatMap((v) =>
        (v.projected?.sources ?? []).flatMap((s) =>
          s.serviceAccountToken ? [{ volume: v.name, ...s.serviceAccountToken }] : [],
        ),
      );
      let checked = 0;
      for (const [, name, value] of prose.matchAll(/`([A-Z][A-Z_]+)(?:=([^`]*))?`/g)) {
        checked++;
        assert.ok(env.has(name), `the container gets ${name}`);
        if (value !== undefined) assert.equal(env.get(name), value, name);
      }
      for (const [, path] of prose.matchAll(/`(\/var\/run\/[^`=]+)`/g)) {
        checked++;
        assert.ok(mounts.includes(path), `${path} is mounted`);
      }
      const [, volume] = /the volume `([a-z-]+)`/.exec(prose)!;
      const [, audience] = /for the audience `([^`]+)`/.exec(prose)!;
      const [, seconds] = /\(valid (\d+) s\)/.exec(prose)!;
      assert.deepEqual(
        tokens.map((t) => [t.volume, t.audience, t.expirationSeconds]),
        [[volume, audience, Number(seconds)]],
      );
      assert.ok(checked >= 4, `${checked} facts`);
    });
});
