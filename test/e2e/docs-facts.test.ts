// The sentences in the docs that repeat a fact the code owns, held to the code: the README's
// Configuration table (flags and defaults) to src/config.ts; the chart README's rows to
// values.yaml and the flags they feed; every RBAC grant the docs state to the chart as helm renders
// it (verbs, by name, cluster-wide or not), the README's permission sentences to the default and the
// tenant-policy install; every metric named in the docs, with its labels, to what a running `serve`
// exports (and the token requestor's registry), and the `kind` values docs/hardening.md gives to the
// ones it writes; the commands of docs/install.md's "Without Helm", run as written.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { COMMANDS, commandHelp, EXIT, usage } from '../../src/cli-args.ts';
import { createProviders } from '../../src/clouds/index.ts';
import { loadConfig, settings } from '../../src/config.ts';
import { previewPod } from '../../src/commands/preview.ts';
import { createMetrics } from '../../src/metrics.ts';
import { defaultOf, type Setting } from '../../src/settings.ts';
import { createRequestorMetrics } from '../../src/token-requestor/metrics.ts';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { all, type Manifest, renderChart } from '../support/chart.ts';
import { startWebhook, type WebhookProcess } from '../support/webhook.ts';
import { httpsRequest } from '../support/https-client.ts';
import { WIF_PROVIDER as PROVIDER } from '../support/identities.ts';
import { scriptVars } from '../harness/node-images.ts';

const run = promisify(execFile);

const ROOT = resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
const DOCS = [
  'README.md',
  'charts/workload-identity-webhook/README.md',
  ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`),
].filter((f) => f.endsWith('.md'));
const byFlag = new Map((Object.values(settings) as Setting<unknown>[]).map((s) => [s.flag, s]));

/** Paragraphs (blank-line separated) of a Markdown file, each on one line. */
function paragraphs(file: string): string[] {
  return read(file)
    .split(/\n\s*\n/)
    .map((p) => p.replace(/\s*\n\s*/g, ' '));
}

function paragraph(file: string, containing: string): string {
  const found = paragraphs(file).filter((p) => p.includes(containing));
  assert.equal(found.length, 1, `one paragraph of ${file} contains "${containing}"`);
  return found[0];
}

describe("README's Configuration table", () => {
  const MiB = 1024 * 1024;
  /** A default as the table writes it: off for a false switch, MiB for whole mebibytes, — for none. */
  const readable = (s: Setting<unknown>) =>
    s.default === false
      ? 'off'
      : typeof s.default === 'number' && s.default >= MiB && s.default % MiB === 0
        ? `${s.default / MiB} MiB`
        : (defaultOf(s) ?? '—');
  const table = read('README.md').split('## Configuration')[1].split('\n## ')[0];
  const rows = [...table.matchAll(/^\| (`--.*?) \| (.*?) \| (.*) \|$/gm)];

  test('every flag it names is a setting, and its defaults are the code defaults, in the order of its flags', () => {
    assert.ok(rows.length >= 20, `${rows.length} rows`);
    for (const [, flagsCell, defaults] of rows) {
      const flags = [...flagsCell.matchAll(/`--([a-z0-9-]+)/g)].map((m) => m[1]);
      for (const f of flags) assert.ok(byFlag.has(f), `--${f} is a setting of src/config.ts`);
      assert.equal(defaults, flags.map((f) => readable(byFlag.get(f)!)).join(', '), `defaults of ${flagsCell}`);
    }
  });
});

describe("the chart README's Values table", () => {
  const readme = read('charts/workload-identity-webhook/README.md');
  const values = parse(read('charts/workload-identity-webhook/values.yaml')) as Record<string, unknown>;
  const flagOf = new Map(
    [...read('charts/workload-identity-webhook/templates/_helpers.tpl').matchAll(/^(\w+): ([a-z0-9-]+)$/gm)].map(
      (m) => [m[1], m[2]],
    ),
  );
  const rows = [...readme.split('## Values')[1].matchAll(/^\| `([^`]+)` \| `(.*?)` \| (.*) \|$/gm)];

  /** The value at a dotted path; a key may hold dots itself (nodeSelector.kubernetes.io/os): the longest that exists wins. */
  const at = (path: string, o: unknown = values): unknown => {
    if (path === '') return o;
    const parts = path.split('.');
    for (let n = parts.length; n > 0; n--) {
      const key = parts.slice(0, n).join('.');
      const map = o as Record<string, unknown> | undefined;
      if (map && Object.hasOwn(map, key)) return at(parts.slice(n).join('.'), map[key]);
    }
    return undefined;
  };

  test('each default, read as YAML, is the value in values.yaml', () => {
    assert.ok(rows.length > 50);
    // The cell is the value as YAML (`[kube-system]`, `"0440"`, `""`): read back, it is the value itself.
    for (const [, path, cell] of rows) assert.deepEqual(parse(cell), at(path), `the default of ${path}: ${cell}`);
  });

  test("each config row names the flag its value feeds (templates/_helpers.tpl), and that flag's own row is a setting", () => {
    for (const [, path, , text] of rows.filter((r) => r[1].startsWith('config.'))) {
      const key = path.slice('config.'.length);
      const flag = flagOf.get(key);
      assert.ok(flag, `config.${key} maps to a flag`);
      assert.ok(byFlag.has(flag), `--${flag} is a setting`);
      assert.ok(text.startsWith(`\`--${flag}\``), `the row of config.${key} starts with \`--${flag}\`: ${text}`);
    }
  });
});

// ---- RBAC: what the docs say each ServiceAccount may do, against what the chart grants ----

type Grants = Map<string, string>; // resource -> sorted verbs, joined

interface Bound {
  rules: { resources: string[]; verbs: string[]; resourceNames?: string[] }[];
  clusterWide: boolean;
}

/** Every rule bound to the ServiceAccount, with whether its binding is a ClusterRoleBinding. */
function boundTo(manifests: Manifest[], serviceAccount: string): Bound[] {
  const bindings = [...all(manifests, 'RoleBinding'), ...all(manifests, 'ClusterRoleBinding')].filter((b) =>
    (b.subjects as { kind: string; name: string }[]).some(
      (s) => s.kind === 'ServiceAccount' && s.name === serviceAccount,
    ),
  );
  return bindings.map((b) => {
    const role = manifests.find((m) => m.kind === b.roleRef.kind && m.metadata.name === b.roleRef.name)!;
    assert.ok(role, `${b.kind} ${b.metadata.name} refers to a rendered ${b.roleRef.kind}`);
    return { rules: role.rules, clusterWide: b.kind === 'ClusterRoleBinding' };
  });
}

function grantsOf(bound: Bound[], filter: (rule: Bound['rules'][number], b: Bound) => boolean = () => true): Grants {
  const verbs = new Map<string, Set<string>>();
  for (const b of bound)
    for (const rule of b.rules)
      if (filter(rule, b))
        for (const r of rule.resources) for (const v of rule.verbs) verbs.set(r, (verbs.get(r) ?? new Set()).add(v));
  return new Map([...verbs].map(([r, v]) => [r, [...v].sort().join(',')]));
}

/** The grants a sentence states, written `resource` (`verb`, `verb`): the form the docs use for RBAC. */
function claims(text: string): Grants {
  const out = new Map<string, Set<string>>();
  for (const m of text.matchAll(/`([a-z][a-z/]*)` \(`([a-z]+)`((?:, `[a-z]+`)*)/g)) {
    const verbs = [m[2], ...[...m[3].matchAll(/`([a-z]+)`/g)].map((v) => v[1])];
    out.set(m[1], new Set([...(out.get(m[1]) ?? []), ...verbs]));
  }
  return new Map([...out].map(([r, v]) => [r, [...v].sort().join(',')]));
}

describe('RBAC in the docs is what the chart renders', () => {
  let manifests: Manifest[];
  let webhook: Bound[];
  let requestor: Bound[];
  before(async () => {
    ({ manifests } = await renderChart({ tokenRequestor: { enabled: true, namespaces: ['apps'] } }));
    const sa = (component: string) =>
      all(manifests, 'Deployment').find((d) => d.metadata.labels?.['app.kubernetes.io/component'] === component)!.spec
        .template.spec.serviceAccountName as string;
    webhook = boundTo(manifests, sa('webhook'));
    requestor = boundTo(manifests, sa('token-requestor'));
    assert.ok(webhook.length > 0 && requestor.length > 0);
  });

  const cases: {
    file: string;
    containing: string;
    who: () => Bound[];
    only?: (r: Bound['rules'][number], b: Bound) => boolean;
  }[] = [
    {
      file: 'charts/workload-identity-webhook/README.md',
      containing: 'a ServiceAccount whose ClusterRole',
      who: () => webhook,
    },
    {
      file: 'charts/workload-identity-webhook/README.md',
      containing: 'The token requestor also reads',
      who: () => requestor,
    },
    {
      file: 'docs/install.md',
      containing: 'least privileged',
      who: () => webhook,
      only: (_, b) => b.clusterWide, // what it may do cluster-wide
    },
    {
      file: 'docs/install.md',
      containing: 'The webhook may read and update that Secret',
      who: () => webhook,
      only: (r) => (r.resourceNames?.length ?? 0) > 0, // what it may do by name
    },
  ];
  for (const c of cases) {
    test(`${c.file}: "${c.containing} ..." states every verb granted and no other`, () => {
      const text = paragraph(c.file, c.containing);
      assert.deepEqual(claims(text), grantsOf(c.who(), c.only), text);
      const clusterWide = c.who().some((b) => b.clusterWide);
      if (/never cluster-wide/.test(text)) assert.equal(clusterWide, false, 'it says never cluster-wide');
      if (/(?<!never |else )cluster-wide/.test(text)) assert.equal(clusterWide, true, 'it says cluster-wide');
    });
  }

  test("docs/secrets.md: the token requestor's ClusterRole as shown is the one rendered", () => {
    const section = read('docs/secrets.md').split('### Its permissions')[1];
    const yaml = /```yaml\n([\s\S]*?)```/.exec(section)![1];
    const shown = parseAllDocuments(yaml)
      .map((d) => d.toJS() as Manifest)
      .find((m) => m?.kind === 'ClusterRole')!;
    const rendered = all(manifests, 'ClusterRole').find(
      (r) => r.metadata.labels?.['app.kubernetes.io/component'] === 'token-requestor',
    )!;
    assert.deepEqual(shown.rules, rendered.rules);
  });

  test("README's Permissions: every grant of the default install, and what tenant policy adds, as helm renders them", async () => {
    const webhookOf = (rendered: Manifest[]) =>
      boundTo(
        rendered,
        all(rendered, 'Deployment').find((d) => d.metadata.labels?.['app.kubernetes.io/component'] === 'webhook')!.spec
          .template.spec.serviceAccountName as string,
      );
    const defaults = grantsOf(webhookOf((await renderChart()).manifests));
    const withPolicy = grantsOf(webhookOf((await renderChart({ config: { watchPolicies: true } })).manifests));
    const stated = paragraph('README.md', 'What the default install lets the webhook do');
    assert.deepEqual(claims(stated), defaults, stated);
    const added = paragraph('README.md', 'Tenant policy (`config.watchPolicies=true`) adds');
    assert.deepEqual(claims(added), new Map([...withPolicy].filter(([r, v]) => defaults.get(r) !== v)), added);
    assert.ok(claims(added).size > 0, 'tenant policy adds grants');
    const counting = grantsOf(
      webhookOf((await renderChart({ config: { slippedPodsIntervalSeconds: 300 } })).manifests),
    );
    const slipped = paragraph('README.md', 'The count of Pods that slipped past the webhook');
    assert.deepEqual(claims(slipped), new Map([...counting].filter(([r, v]) => defaults.get(r) !== v)), slipped);
  });

  test("no doc calls the webhook's access read-only: it updates its Secret and patches its webhook configuration", () => {
    for (const file of DOCS)
      for (const p of paragraphs(file))
        assert.doesNotMatch(p, /read-only access|read access to ServiceAccounts only/, `${file}: ${p}`);
  });

  test('the claim reader reads what it should (it would have caught the old token-requestor paragraph)', () => {
    const old =
      'Its RBAC: Secrets `get`, `list`, `watch`, `update`, `patch` and ServiceAccounts `get`, `list`, `watch` cluster-wide';
    assert.deepEqual(claims(old), new Map(), 'the old form states no grant the reader accepts');
    assert.notDeepEqual(claims(old), grantsOf(requestor));
    assert.deepEqual(
      claims('`secrets` (`list`, `watch`, `patch`; `list` by name) and `events` (`create`)'),
      new Map([
        ['secrets', 'list,patch,watch'],
        ['events', 'create'],
      ]),
    );
  });
});

// ---- Metrics: names and labels in the docs, against what runs ----

describe('metrics named in the docs', () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  let served: Set<string>;
  before(async () => {
    cp = await startControlPlane({ name: 'docs-facts' });
    wh = await startWebhook(cp);
    served = new Set([...(await wh.metrics()).matchAll(/^# HELP (\S+) /gm)].map((m) => m[1]));
  });
  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  /** name -> label names, of the code's registries (the running processes build theirs the same way). */
  const labels = new Map<string, string[]>();
  for (const registry of [createMetrics().registry, createRequestorMetrics().registry])
    for (const m of registry.getMetricsAsArray() as unknown as { name: string; labelNames: string[] }[])
      labels.set(m.name, [...m.labelNames].sort());
  // Node.js's own metrics, under their standard names: documented as the families process_* and nodejs_*.
  const isDefault = (name: string) => /^(process|nodejs)_/.test(name);
  const requestorOnly = (name: string) => name.startsWith('wiw_token_requestor_');

  test("serve exports each of its registry's metrics", () => {
    for (const name of labels.keys()) if (!requestorOnly(name)) assert.ok(served.has(name), `serve exports ${name}`);
  });

  test('the `kind` values docs/hardening.md gives wiw_admission_requests_total are the ones serve writes', async () => {
    const review = (kind: string, object: object) => ({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: `docs-facts-${kind}`,
        kind: { group: '', version: 'v1', kind },
        resource: { group: '', version: 'v1', resource: `${kind.toLowerCase()}s` },
        namespace: 'default',
        operation: 'CREATE',
        object: { apiVersion: 'v1', kind, metadata: { name: 'x', namespace: 'default' }, ...object },
      },
    });
    const bodies = [
      review('Pod', { spec: { serviceAccountName: 'default', containers: [{ name: 'a', image: 'a' }] } }),
      review('Secret', { data: {} }),
      review('ConfigMap', { data: {} }),
      { kind: 'NotAReview' },
    ];
    for (const body of bodies)
      await httpsRequest(`${wh.url}/mutate`, {
        method: 'POST',
        ca: wh.caPem,
        body: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
      });
    const written = new Set(
      [...(await wh.metrics()).matchAll(/^wiw_admission_requests_total\{[^}]*kind="([^"]+)"/gm)].map((m) => m[1]),
    );
    const documented = /object kinds are ([^;]*);/.exec(
      paragraph('docs/hardening.md', 'metric labels come from closed sets'),
    )!;
    assert.ok(documented, 'docs/hardening.md names the object kinds');
    assert.deepEqual([...documented[1].matchAll(/`(\w+)`/g)].map((m) => m[1]).sort(), [...written].sort());
  });

  test('each metric the docs name exists, with exactly the labels they give it', () => {
    let seen = 0;
    for (const file of DOCS) {
      for (const m of read(file).matchAll(/\b(wiw_[a-z_]+)(\{([a-z_,]*)\})?/g)) {
        const [, name, braces, given] = m;
        seen++;
        // A family named with a wildcard (wiw_token_requestor_*): some metric is of it.
        if (name.endsWith('_')) {
          assert.ok(
            [...labels.keys()].some((k) => k.startsWith(name)),
            `${file}: ${name}* names metrics`,
          );
          continue;
        }
        assert.ok(labels.has(name), `${file}: ${name} is a metric`);
        if (!requestorOnly(name)) assert.ok(served.has(name), `${file}: serve exports ${name}`);
        if (braces) assert.deepEqual(given.split(',').sort(), labels.get(name), `${file}: the labels of ${name}`);
      }
    }
    assert.ok(seen > 10);
  });

  test("each of the webhook's and the token requestor's own metrics is documented", () => {
    const text = DOCS.map(read).join('\n');
    for (const name of labels.keys())
      if (!isDefault(name)) assert.match(text, new RegExp(`\\b${name}\\b`), `${name} is in README.md or docs/`);
    for (const family of ['process_', 'nodejs_']) assert.match(text, new RegExp(`\`${family}\\*\``), family);
  });
});

describe("GCP's default audience, per dialect, where the docs give it", () => {
  /** The audience of the token the webhook mounts for a ServiceAccount of these annotations. */
  function audienceFor(annotations: Record<string, string>): string {
    const documents = [
      { kind: 'ServiceAccount', apiVersion: 'v1', metadata: { name: 'sa', namespace: 'apps', annotations } },
      {
        kind: 'Pod',
        apiVersion: 'v1',
        metadata: { name: 'p', namespace: 'apps' },
        spec: { serviceAccountName: 'sa', containers: [{ name: 'app', image: 'app' }] },
      },
    ];
    const text = documents.map((d) => JSON.stringify(d)).join('\n---\n');
    const r = previewPod(createProviders(loadConfig(new Map(), {})), { documents: [{ source: 'x', text }] }, 'json');
    assert.ok(r.allowed);
    const pod = JSON.parse(r.output) as {
      spec: { volumes: { name: string; projected?: { sources: { serviceAccountToken?: { audience: string } }[] } }[] };
    };
    const token = pod.spec.volumes
      .flatMap((v) => v.projected?.sources ?? [])
      .find((s) => s.serviceAccountToken)?.serviceAccountToken;
    return token!.audience;
  }

  test("the code: pfnet's annotations get sts.googleapis.com, Flux's //iam.googleapis.com/<provider>", () => {
    assert.equal(audienceFor({ 'cloud.google.com/workload-identity-provider': PROVIDER }), 'sts.googleapis.com');
    assert.equal(
      audienceFor({ 'gcp.auth.fluxcd.io/workload-identity-provider': PROVIDER }),
      `//iam.googleapis.com/${PROVIDER}`,
    );
  });

  test('--gcp-audience help, the chart README row and docs/trust.md give both', () => {
    const texts = {
      help: settings.gcpAudience.description,
      chart: read('charts/workload-identity-webhook/README.md')
        .split('\n')
        .find((l) => l.startsWith('| `config.gcpAudience`'))!,
      trust: paragraphs('docs/trust.md').find((p) => p.includes('per pool provider'))!,
    };
    for (const [where, text] of Object.entries(texts)) {
      assert.ok(text, where);
      assert.match(text, /`?sts\.googleapis\.com`? for (ServiceAccounts in )?pfnet's/, where);
      assert.match(text, /`?\/\/iam\.googleapis\.com\/<provider>`? for Flux's/, where);
    }
  });
});

describe("docs/install.md's Without Helm commands", () => {
  // kustomize is no binary of this repository: a stand-in writes what `kustomize edit set image
  // NAME=NEWNAME@DIGEST` writes, from the folder it is run in; kubectl renders what `apply -k`
  // would apply from the folder the command names, relative to where the user is then.
  const KUSTOMIZE = `#!/bin/bash
set -eu
[ "$1 $2 $3" = "edit set image" ] || { echo "kustomize stand-in: unexpected $*" >&2; exit 2; }
[ -f kustomization.yaml ] || { echo "kustomize: no kustomization.yaml in $PWD" >&2; exit 1; }
name=\${4%%=*} ref=\${4#*=}
printf 'images:\\n  - name: %s\\n    newName: %s\\n    digest: %s\\n' "$name" "\${ref%@*}" "\${ref#*@}" >>kustomization.yaml
`;
  const KUBECTL = `#!/bin/bash
set -eu
[ "$1 $2" = "apply -k" ] || { echo "kubectl stand-in: unexpected $*" >&2; exit 2; }
exec "$REAL_KUBECTL" kustomize "$3"
`;

  test('run as written from a checkout, they apply webhook-config/ with the image set', async () => {
    const block = /### Without Helm[\s\S]*?```sh\n([\s\S]*?)```/.exec(read('docs/install.md'))![1];
    const dir = mkdtempSync(join(tmpdir(), 'wiw-docs-kustomize-'));
    try {
      cpSync(join(ROOT, 'webhook-config'), join(dir, 'webhook-config'), { recursive: true });
      mkdirSync(join(dir, 'bin'));
      writeFileSync(join(dir, 'bin/kustomize'), KUSTOMIZE, { mode: 0o755 });
      writeFileSync(join(dir, 'bin/kubectl'), KUBECTL, { mode: 0o755 });
      const kubectl = process.env.TEST_ASSET_KUBECTL ?? (await scriptVars('scripts/provide-binaries.sh')).KUBECTL;
      const digest = 'a'.repeat(64);
      const commands = block.replaceAll('REGISTRY/PATH', 'registry.example/team').replaceAll('INDEX_DIGEST', digest);
      const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', commands], {
        cwd: dir,
        env: { ...process.env, PATH: `${join(dir, 'bin')}:${process.env.PATH}`, REAL_KUBECTL: kubectl },
      });
      const deployment = parseAllDocuments(stdout)
        .map((d) => d.toJS() as Manifest)
        .find((m) => m?.kind === 'Deployment')!;
      assert.ok(deployment, 'the kustomization holds the Deployment');
      assert.equal(
        deployment.spec.template.spec.containers[0].image,
        `registry.example/team/workload-identity-webhook@sha256:${digest}`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// ---- The command line's exit codes, the chart's pointers and figures ----

describe('exit codes where the docs and help give them', () => {
  const UNCHECKED = /could not|cannot be reached|unreachable|: unknown/;
  /**
   * What a text says each exit code means: in a sentence about exit codes, each "N meaning" (or
   * "**N** meaning"), and each "what (exit N)" whose what comes just before.
   */
  const stated = (text: string) => {
    const flat = text.replace(/\s+/g, ' ');
    const out: { code: number; means: string }[] = [];
    for (const sentence of flat.split(/\. |\|/).filter((x) => /\bexit\b/i.test(x)))
      for (const m of sentence.matchAll(/(?:\*\*|\b)(\d)\b\**,? ([a-z][^,;|)*]*)/gi))
        out.push({ code: Number(m[1]), means: m[2] });
    for (const m of flat.matchAll(/([^|.]{0,40})\bexit (\d)\b/gi)) out.push({ code: Number(m[2]), means: m[1] });
    return out;
  };
  const texts = () => [
    ...DOCS.map((file) => ({ where: file, text: read(file) })),
    { where: 'help', text: usage() },
    ...Object.keys(COMMANDS).map((c) => ({ where: `${c} --help`, text: commandHelp(c) })),
  ];

  test('"could not check" is exit 3 and bad usage exit 2, wherever a code is given for them', () => {
    let seen = 0;
    for (const { where, text } of texts())
      for (const { code, means } of stated(text)) {
        if (UNCHECKED.test(means)) {
          seen++;
          assert.equal(code, EXIT.unchecked, `${where}: exit ${code} ${means}`);
        }
        if (/^bad usage/.test(means)) {
          seen++;
          assert.equal(code, EXIT.usage, `${where}: exit ${code} ${means}`);
        }
      }
    assert.ok(seen >= 6, `${seen} statements`);
  });

  test('the reader would have caught the old doctor sentences', () => {
    const unchecked = (text: string) =>
      stated(text)
        .filter((x) => UNCHECKED.test(x.means))
        .map((x) => x.code);
    assert.deepEqual(
      unchecked('Exit code: **0** every check passed, **1** a problem found, **2** something could not be checked'),
      [2],
    );
    assert.deepEqual(unchecked('| `api-server` | the API server answers | unreachable: exit 2 |'), [2]);
    assert.deepEqual(unchecked('an unreachable API server (exit 2), and'), [2]);
    assert.deepEqual(
      unchecked('Exit 0 all good, 1 a problem found (each with its fix), 2 something could not be'),
      [2],
    );
  });
});

describe("the chart's pointers", () => {
  const CHART_FILES = [
    'artifacthub-repo.yml',
    'charts/workload-identity-webhook/Chart.yaml',
    'charts/workload-identity-webhook/values.yaml',
    'charts/workload-identity-webhook/README.md',
  ];
  /** GitHub's anchor of a heading. */
  const slug = (heading: string) =>
    heading
      .toLowerCase()
      .replace(/[^\w\s-]/g, '')
      .trim()
      .replace(/\s/g, '-');
  const headings = (file: string) => [...read(file).matchAll(/^#+ (.+)$/gm)].map((m) => m[1].trim());

  test('each section they point at, as docs/X.md#anchor or docs/X.md, "Heading", exists', () => {
    let seen = 0;
    for (const file of CHART_FILES) {
      const text = read(file).replace(/\s*\n\s*#?\s*/g, ' ');
      for (const [, doc, anchor] of text.matchAll(/docs\/([\w-]+\.md)#([\w-]+)/g)) {
        seen++;
        assert.ok(headings(`docs/${doc}`).map(slug).includes(anchor), `${file}: docs/${doc}#${anchor}`);
      }
      for (const [, doc, heading] of text.matchAll(/docs\/([\w-]+\.md), "([^"]+)"/g)) {
        seen++;
        assert.ok(headings(`docs/${doc}`).includes(heading), `${file}: docs/${doc}, "${heading}"`);
      }
    }
    assert.ok(seen >= 3, `${seen} pointers`);
  });

  test('each command they name is a command, and flags are read in `serve --help`', () => {
    for (const file of CHART_FILES) {
      const text = read(file).replace(/\s*\n\s*#?\s*/g, ' ');
      for (const [, words] of text.matchAll(/`workload-identity-webhook ([a-z -]+?)`/g)) {
        const command = words.replace(/ --help$/, '');
        assert.ok(COMMANDS[command], `${file}: \`workload-identity-webhook ${words}\` names a command`);
      }
      assert.doesNotMatch(text, /flag \(see `workload-identity-webhook help`\)/, file);
    }
    assert.match(
      read('charts/workload-identity-webhook/values.yaml'),
      /`workload-identity-webhook serve\s*# --help` lists them/,
    );
  });

  test('values.yaml and the chart README repeat no measured figure: the README Performance section owns them', () => {
    for (const file of CHART_FILES.slice(2))
      assert.doesNotMatch(read(file), /\b(about|measured)[^.]*\b\d+ MiB\b/, `${file} states a measured MiB figure`);
  });
});
