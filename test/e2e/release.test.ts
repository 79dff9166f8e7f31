// The release's parts that need no registry (the end-to-end run against a real one is in
// test/e2e/node-e2e.test.ts): package.json as the one source of the version, the Artifact Hub
// metadata, the chart as the release stamps it, the release's refusal of a bad registry, and the
// release workflow (.github/workflows/release.yml) as actionlint and the docs see it.
// (scripts/provide-registry.sh from an empty cache: test/e2e/setup-scripts.test.ts.)
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { CHART_DIR, IMAGE_NAME, PLATFORMS, setChartImage, setChartVersion } from '../../scripts/release.ts';
import { KUBE_VERSION, REPO, helm, parseRendered } from '../support/chart.ts';

const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
  version: string;
  license: string;
  homepage: string;
  repository: { url: string };
  scripts: Record<string, string>;
};
const chartYaml = (dir = CHART_DIR) => readFileSync(join(dir, 'Chart.yaml'), 'utf8');
const temps: string[] = [];
const tempDir = (prefix: string): string => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
};
after(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

describe('one version: package.json', () => {
  test("Chart.yaml's version and appVersion are package.json's (syncing changes nothing)", () => {
    const chart = parse(chartYaml()) as { version: string; appVersion: string };
    assert.equal(chart.version, pkg.version);
    assert.equal(chart.appVersion, pkg.version);
    const copy = join(tempDir('wiw-chart-'), 'chart');
    cpSync(CHART_DIR, copy, { recursive: true });
    setChartVersion(copy, pkg.version);
    assert.equal(chartYaml(copy), chartYaml(), 'the checkout is in sync, comments and all');
  });

  test('`npm version` writes the new version into Chart.yaml and the plain manifests', () => {
    assert.match(pkg.scripts.version, /node scripts\/release\.ts --sync-chart/);
    assert.match(pkg.scripts.version, /write-plain-manifests/);
    assert.match(pkg.scripts.version, /git add charts\/workload-identity-webhook\/Chart\.yaml webhook-config/);
    const copy = join(tempDir('wiw-chart-'), 'chart');
    cpSync(CHART_DIR, copy, { recursive: true });
    setChartVersion(copy, '9.8.7');
    const text = chartYaml(copy);
    assert.deepEqual(
      [(parse(text) as { version: string }).version, (parse(text) as { appVersion: string }).appVersion],
      ['9.8.7', '9.8.7'],
    );
    assert.ok(text.includes('# Both are package.json'), 'comments are kept');
  });
});

describe('Artifact Hub metadata', () => {
  const chart = parse(chartYaml()) as {
    home: string;
    sources: string[];
    maintainers: { name: string; email?: string; url?: string }[];
    annotations: Record<string, string>;
  };

  test('home, sources and maintainers; home and sources are package.json homepage and repository', () => {
    assert.equal(chart.home, pkg.homepage);
    assert.deepEqual(chart.sources, [pkg.repository.url]);
    assert.ok(chart.maintainers.length > 0 && chart.maintainers.every((m) => m.name));
  });

  test('annotations: licence, the image on both platforms, a changelog of known kinds, links', () => {
    const a = chart.annotations;
    assert.equal(a['artifacthub.io/license'], pkg.license);
    assert.deepEqual(parse(a['artifacthub.io/images']), [
      { name: IMAGE_NAME, image: `${IMAGE_NAME}:${pkg.version}`, platforms: [...PLATFORMS] },
    ]);
    const changes = parse(a['artifacthub.io/changes']) as { kind: string; description: string }[];
    assert.ok(changes.length > 0);
    for (const c of changes) {
      assert.ok(['added', 'changed', 'deprecated', 'removed', 'fixed', 'security'].includes(c.kind), c.kind);
      assert.ok(c.description.length > 10);
    }
    for (const link of parse(a['artifacthub.io/links']) as { name: string; url: string }[])
      assert.ok(link.name && link.url.startsWith(`${pkg.homepage}/`), link.url);
  });

  test('artifacthub-repo.yml names the section of docs/install.md that says how to push it, which exists', () => {
    const text = readFileSync(join(REPO, 'artifacthub-repo.yml'), 'utf8');
    const section = /docs\/install\.md, "([^"]+)"/.exec(text)?.[1];
    assert.ok(section, 'it names a section');
    const headings = readFileSync(join(REPO, 'docs/install.md'), 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('#'))
      .map((l) => l.replace(/^#+\s*/, ''));
    assert.ok(headings.includes(section), `docs/install.md has a heading "${section}"`);
  });

  test('artifacthub-repo.yml names the owners', () => {
    const repo = parse(readFileSync(join(REPO, 'artifacthub-repo.yml'), 'utf8')) as { owners: { name: string }[] };
    assert.ok(repo.owners.length > 0 && repo.owners.every((o) => o.name));
  });
});

describe('the chart as the release stamps it', () => {
  test('names the image by the index digest, lists it for Artifact Hub, and lints', async () => {
    const dir = join(tempDir('wiw-stamped-'), 'workload-identity-webhook');
    cpSync(CHART_DIR, dir, { recursive: true });
    const image = {
      repository: 'registry.example:5000/team/workload-identity-webhook',
      tag: '1.2.3',
      digest: `sha256:${'ab'.repeat(32)}`,
    };
    setChartVersion(dir, '1.2.3', { image: `${image.repository}:1.2.3@${image.digest}`, platforms: [...PLATFORMS] });
    setChartImage(dir, image);
    const meta = parse(chartYaml(dir)) as { version: string; annotations: Record<string, string> };
    assert.equal(meta.version, '1.2.3');
    assert.deepEqual(parse(meta.annotations['artifacthub.io/images']), [
      { name: IMAGE_NAME, image: `${image.repository}:1.2.3@${image.digest}`, platforms: [...PLATFORMS] },
    ]);
    const { manifests } = parseRendered(await helm(['template', 'wiw', dir, '--kube-version', KUBE_VERSION]));
    const deployment = manifests.find(
      (m) => m.kind === 'Deployment' && m.metadata.labels?.['app.kubernetes.io/component'] === 'webhook',
    )!;
    assert.equal(deployment.spec.template.spec.containers[0].image, `${image.repository}@${image.digest}`);
    assert.equal(deployment.metadata.labels?.['app.kubernetes.io/version'], '1.2.3');
    await helm(['lint', dir, '--strict', '--kube-version', KUBE_VERSION]);
  });
});

describe('npm run release', () => {
  const release = (args: string[]) =>
    run(process.execPath, ['scripts/release.ts', ...args], { cwd: REPO }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
    );

  test('refuses a registry that is not HOST[:PORT]/PATH before building anything', async () => {
    for (const bad of [
      'reg.example/x;touch /tmp/wiw-pwned',
      'https://reg.example/x',
      'Reg.Example/x',
      'reg.example/x/',
      '-x',
    ]) {
      const { code, stderr } = await release(['--registry', bad]);
      assert.equal(code, 1, bad);
      assert.match(stderr, /is not HOST\[:PORT\]\/PATH in lowercase/, bad);
      assert.doesNotMatch(stderr, /building/);
    }
    assert.equal(existsSync('/tmp/wiw-pwned'), false);
  });

  test('without --registry, or with an unknown flag, prints its usage', async () => {
    for (const args of [
      [],
      ['--registry'],
      ['--registry', 'reg.example/x', '--push-everything'],
      ['--registry', 'reg.example/x', '--sign'],
      ['--registry', 'reg.example/x', 'stray'],
    ]) {
      const { code, stderr } = await release(args);
      assert.equal(code, 2, args.join(' '));
      assert.match(stderr, /^usage: npm run release -- --registry HOST\[:PORT\]\/PATH/);
    }
  });

  test('--sign with a key file that is not there is refused before building anything', async () => {
    const { code, stderr } = await release(['--registry', 'reg.example/x', '--sign', '/nonexistent/cosign.key']);
    assert.equal(code, 1);
    assert.match(stderr, /--sign "\/nonexistent\/cosign\.key": no such key file \(or say --sign keyless\)/);
    assert.doesNotMatch(stderr, /building/);
  });
});

describe('the release workflow (.github/workflows/release.yml)', () => {
  const WORKFLOW = join(REPO, '.github/workflows/release.yml');
  const text = readFileSync(WORKFLOW, 'utf8');
  const workflow = parse(text) as {
    on: { push: { tags: string[] } };
    permissions: object;
    defaults: { run: { shell: string } };
    jobs: Record<string, { permissions: Record<string, string>; steps: { uses?: string; run?: string }[] }>;
  };
  const actionlint = async (): Promise<string> => {
    const { stdout } = await run('bash', ['scripts/provide-actionlint.sh'], { cwd: REPO });
    return /^ACTIONLINT=(.*)$/m.exec(stdout)![1].replace(/\\(.)/g, '$1');
  };
  const lint = async (file: string) =>
    run(await actionlint(), ['-no-color', '-oneline', file], { cwd: REPO }).then(
      () => '',
      (err: { stdout: string }) => err.stdout,
    );

  test('actionlint passes it, and refuses a copy with a broken expression, as `npm run lint` would', async () => {
    assert.equal(await lint(WORKFLOW), '');
    assert.match(
      readFileSync(join(REPO, 'scripts/lint-shell.sh'), 'utf8'),
      /provide-actionlint\.sh\)"\n"\$ACTIONLINT"/,
    );
    const broken = join(tempDir('wiw-workflow-'), 'release.yml');
    writeFileSync(broken, text.replace('${{ github.repository_owner }}', '${{ github.repository_ownr }}'));
    assert.match(await lint(broken), /property "repository_ownr" is not defined/);
  });

  test('on a version tag it runs `npm run release` signed keyless with the SBOM, with only the permissions that needs', () => {
    assert.deepEqual(workflow.on.push.tags, ['v[0-9]+.[0-9]+.[0-9]+*']);
    assert.deepEqual(workflow.permissions, {}, 'nothing by default');
    // A named shell runs with -eo pipefail: a failed release piped into tee fails its step.
    assert.equal(workflow.defaults.run.shell, 'bash');
    const [job] = Object.values(workflow.jobs);
    assert.deepEqual(job.permissions, {
      contents: 'write',
      packages: 'write',
      'id-token': 'write',
      attestations: 'write',
      'artifact-metadata': 'write',
    });
    const runs = job.steps.map((s) => s.run ?? '').join('\n');
    assert.match(runs, /npm run --silent release -- \\\n\s+--registry "\$REGISTRY" --sign keyless --sbom /);
    assert.match(runs, /REGISTRY=ghcr\.io\/\$\{OWNER,,\}/);
    assert.match(runs, /"\$GITHUB_REF_NAME" != "v\$version"/, "the tag must be package.json's version");
    assert.match(runs, /scripts\/provide-cosign\.sh/, 'the cosign the tests use');
    // Every action pinned by commit, so a moved tag changes nothing that signs a release.
    const uses = job.steps.flatMap((s) => (s.uses ? [s.uses] : []));
    assert.ok(uses.length >= 4);
    for (const u of uses) assert.match(u, /^[\w-]+\/[\w-]+@[0-9a-f]{40}$/, u);
    assert.ok(
      uses.some((u) => u.startsWith('actions/attest@')),
      'provenance',
    );
  });

  test("the README and docs/install.md name where it publishes (package.json's repository) and what is not published yet", () => {
    const owner = new URL(pkg.repository.url).pathname.split('/')[1];
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    const install = readFileSync(join(REPO, 'docs/install.md'), 'utf8');
    for (const doc of [readme, install]) {
      assert.ok(doc.includes(`ghcr.io/${owner}/workload-identity-webhook:VERSION`));
      assert.ok(doc.includes(`oci://ghcr.io/${owner}/charts/workload-identity-webhook`));
      assert.match(doc, /No version has been tagged|no version has been tagged/);
    }
    // The identity a user verifies is this workflow's, from a tag.
    const identity = /IDENTITY='([^']+)'/.exec(install)![1];
    assert.ok(
      new RegExp(identity).test(`${pkg.repository.url}/.github/workflows/release.yml@refs/tags/v${pkg.version}`),
      identity,
    );
  });
});

describe('upgrade and uninstall as the docs write them (run on a node by test/e2e/node-e2e.test.ts)', () => {
  const docs = [
    'README.md',
    'charts/workload-identity-webhook/README.md',
    'charts/workload-identity-webhook/templates/NOTES.txt',
    ...readdirSync(join(REPO, 'docs')).map((f) => `docs/${f}`),
  ].filter((f) => /\.(md|txt)$/.test(f));
  const commands = (file: string): string[] =>
    [...readFileSync(join(REPO, file), 'utf8').matchAll(/^```(?:sh|shell|bash|console)?\n([\s\S]*?)^```$/gm)].map((m) =>
      m[1].replace(/\\\n\s*/g, ''),
    );

  test('no documented helm upgrade keeps the old image: none uses --reuse-values', () => {
    const upgrades = docs.flatMap((file) =>
      commands(file).flatMap((block) =>
        block
          .split('\n')
          .filter((l) => /\bhelm upgrade\b/.test(l))
          .map((l) => `${file}: ${l}`),
      ),
    );
    assert.ok(
      upgrades.some((u) => u.startsWith('docs/install.md: ')),
      'docs/install.md documents the upgrade',
    );
    assert.deepEqual(
      upgrades.filter((u) => /--reuse-values\b/.test(u)),
      [],
    );
    for (const u of upgrades.filter((l) => l.includes('oci://')))
      assert.match(u, /--reset-then-reuse-values|\s-f\s|--values\s/, u);
  });

  test("the upgrade applies every CRD of the chart's crds/, and the uninstall names each as what remains and deletes it", () => {
    const install = readFileSync(join(REPO, 'docs/install.md'), 'utf8');
    const section = (heading: string) => install.split(/^## /m).find((s) => s.startsWith(heading)) ?? '';
    assert.match(section('3. Upgrade'), /helm show crds [^\n]*\|\s*kubectl apply --server-side/);
    const crds = readdirSync(join(CHART_DIR, 'crds')).map(
      (f) => (parse(readFileSync(join(CHART_DIR, 'crds', f), 'utf8')) as { metadata: { name: string } }).metadata.name,
    );
    assert.ok(crds.length > 0);
    const uninstall = section('4. Uninstall');
    for (const name of crds) {
      assert.ok(uninstall.includes(`- the CustomResourceDefinition \`${name}\``), `${name} is listed as remaining`);
      assert.match(uninstall, new RegExp(`kubectl delete customresourcedefinition ${name.replaceAll('.', '\\.')}`));
    }
  });
});
