// The differential harness in `npm test`: the corpus of Pods from real charts and the peers'
// READMEs goes to `serve` and to each peer on one kube-apiserver, and the stored Pods must be the
// same but for rows of docs/compatibility.md. The AWS peer runs from its binary (built from the Go
// module proxy by scripts/provide-peers.sh, cached); Azure's and pfnet's answers come from their
// recordings (test/fixtures/peer-diff/recorded, made from their binaries by `npm run peer-diff --
// --record`, which also holds a live run to them), since their modules cannot be built here.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import {
  CONFIGS,
  type ConfigReport,
  formatReport,
  loadCorpus,
  loadRecording,
  pinnedVersions,
  providePeers,
  RECORDED,
  rowsMet,
  runPeerDiff,
} from '../support/peer-diff.ts';
import { diffPods } from '../support/peer-diff-compare.ts';
import { ROWS } from '../support/peer-diff-rows.ts';
import type { Pod } from '../../src/kube/types.ts';

const ROOT = join(import.meta.dirname, '../..');
const CACHE =
  process.env.WIW_CACHE_DIR ??
  join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'workload-identity-webhook');
const corpus = loadCorpus();
const compatibility = readFileSync(join(ROOT, 'docs/compatibility.md'), 'utf8');
// The peers' rows; the policy mode's section has its own (test/e2e/policy-mode.test.ts).
const peerRows = compatibility.slice(0, compatibility.indexOf('## The policy mode'));
const documented = new Set([...peerRows.matchAll(/^\| `([a-z0-9.-]+)` \|/gm)].map((m) => m[1]));

describe('the corpus', () => {
  const pods = corpus.flatMap((f) => f.pods.map((p) => ({ cloud: f.cloud, pod: p })));
  const containers = (p: Pod) => [...(p.spec?.initContainers ?? []), ...(p.spec?.containers ?? [])];

  test('at least 40 Pods over the three clouds, each file naming its origin (chart and version, or README and ref)', () => {
    assert.ok(pods.length >= 40, `${pods.length} Pods`);
    for (const cloud of ['aws', 'azure', 'gcp']) assert.ok(pods.filter((p) => p.cloud === cloud).length >= 10, cloud);
    for (const f of corpus) {
      assert.ok(f.origin.ref, `${f.file}: origin.ref`);
      assert.ok((f.origin.chart && f.origin.version) || f.origin.readme, `${f.file}: a chart and version, or a README`);
    }
  });

  test('Windows Pods, native sidecars, init containers and user env that collides with injected names, for every cloud', () => {
    const injected =
      /^(AWS_(ROLE_ARN|REGION|DEFAULT_REGION|STS_REGIONAL_ENDPOINTS)|AZURE_(CLIENT_ID|TENANT_ID)|GOOGLE_APPLICATION_CREDENTIALS|CLOUDSDK_(CORE_PROJECT|COMPUTE_REGION))$/;
    for (const cloud of ['aws', 'azure', 'gcp']) {
      const mine = pods.filter((p) => p.cloud === cloud).map((p) => p.pod);
      assert.ok(
        mine.some((p) => p.spec?.nodeSelector?.['kubernetes.io/os'] === 'windows'),
        `${cloud}: Windows`,
      );
      assert.ok(
        mine.some((p) => p.spec?.initContainers?.some((c) => c.restartPolicy === 'Always')),
        `${cloud}: a native sidecar`,
      );
      assert.ok(
        mine.some((p) => p.spec?.initContainers?.length),
        `${cloud}: init containers`,
      );
      assert.ok(
        mine.some((p) => containers(p).some((c) => c.env?.some((e) => injected.test(e.name)))),
        `${cloud}: user env under an injected name`,
      );
    }
  });
});

describe('the semantic comparison', () => {
  const stored = (env: { name: string; value: string }[]): Pod => ({
    metadata: { name: 'p' },
    spec: { containers: [{ name: 'c', env }] },
  });

  test('env order counts only where a $(VAR) reference changes meaning; volumes and mounts by name and path', () => {
    const a = { name: 'A', value: '1' };
    const ref = { name: 'B', value: '$(A)-x' };
    assert.deepEqual(diffPods(stored([a, ref]), stored([a, ref])), []);
    const plain = { name: 'C', value: 'c' };
    assert.deepEqual(diffPods(stored([a, plain, ref]), stored([plain, a, ref])), [], 'order without a reference');
    const moved = diffPods(stored([a, ref]), stored([ref, a]));
    assert.deepEqual(
      moved.map((d) => d.path),
      ['spec.containers[c].env[B].$(references)'],
      'B expands $(A) in one Pod and keeps it literal in the other',
    );
    const vols = (names: string[]): Pod => ({
      metadata: { name: 'p' },
      spec: { volumes: names.map((name) => ({ name })) },
    });
    assert.deepEqual(diffPods(vols(['x', 'y']), vols(['y', 'x'])), []);
    assert.deepEqual(
      diffPods(vols(['x']), vols(['x', 'y'])).map((d) => d.path),
      ['spec.volumes[y]'],
    );
  });

  test('a row removes only its own difference: anything else in the same Pod stays unlisted', () => {
    const row = ROWS.find((r) => r.id === 'gcp-google-cloud-project')!;
    const ours: Pod = {
      metadata: { name: 'p' },
      spec: {
        containers: [
          {
            name: 'c',
            env: [
              { name: 'CLOUDSDK_CORE_PROJECT', value: 'p1' },
              { name: 'GOOGLE_CLOUD_PROJECT', value: 'p1' },
              { name: 'EXTRA', value: 'x' },
            ],
          },
        ],
      },
    };
    const theirs: Pod = {
      metadata: { name: 'p' },
      spec: { containers: [{ name: 'c', env: [{ name: 'CLOUDSDK_CORE_PROJECT', value: 'p1' }] }] },
    };
    const ctx = {
      peer: 'pfnet',
      config: CONFIGS[4],
      serviceAccount: {},
      input: theirs,
      ours: { allowed: true },
      theirs: { allowed: true },
    } as const;
    const next = row.explain(structuredClone(ours), structuredClone(theirs), ctx)!;
    assert.deepEqual(
      diffPods(next.ours, next.theirs).map((d) => d.path),
      ['spec.containers[c].env[EXTRA]'],
    );
    // A GOOGLE_CLOUD_PROJECT that is not the container's CLOUDSDK_CORE_PROJECT is no part of the row.
    ours.spec!.containers![0].env![1].value = 'p2';
    assert.equal(row.explain(structuredClone(ours), structuredClone(theirs), ctx), undefined);
  });
});

describe('the peers beside serve, Pod by Pod', () => {
  let cp: ControlPlane;
  let reports: ConfigReport[];
  let vars: Record<string, string>;

  before(async () => {
    vars = providePeers(['aws']);
    cp = await startControlPlane({ name: 'peer-diff' });
    reports = await runPeerDiff({
      cp,
      binaries: { aws: vars.AWS_PEER },
      versions: pinnedVersions(),
      lockDir: CACHE,
    });
    console.log(formatReport(reports));
  });
  after(() => cp?.stop());

  test('a serve that cannot start takes the peer started beside it down too', async () => {
    const aws = CONFIGS.find((c) => c.peer === 'aws')!;
    const broken = { ...aws, id: 'aws/serve-refuses', ourArgs: ['--no-such-flag'] };
    const options = { cp, binaries: { aws: vars.AWS_PEER }, versions: pinnedVersions(), lockDir: CACHE };
    await assert.rejects(runPeerDiff({ ...options, configs: [broken] }), /no-such-flag|exited/);
    assert.deepEqual(peersRunningOn(cp), []);
  });

  test("every configuration of every peer ran, over its cloud's whole corpus, against the binary or its recording", () => {
    assert.deepEqual(
      reports.map((r) => [r.config.id, r.source]),
      CONFIGS.map((c) => [c.id, c.peer === 'aws' ? 'binary' : 'recorded']),
    );
    for (const r of reports) assert.ok(r.pods.length >= 20, `${r.config.id}: ${r.pods.length} Pods`);
  });

  test('no Pod differs in a way docs/compatibility.md does not list', () => {
    const unlisted = reports.flatMap((r) =>
      r.pods.filter((p) => p.outcome.kind === 'unlisted').map((p) => `${r.config.id} ${p.pod}`),
    );
    assert.deepEqual(unlisted, [], formatReport(reports));
  });

  test('every row the harness knows is a row of docs/compatibility.md, and a Pod of the corpus meets it', () => {
    const met = rowsMet(reports);
    for (const row of ROWS) {
      assert.ok(documented.has(row.id), `${row.id} is not a row of docs/compatibility.md`);
      assert.ok(met.has(row.id), `no Pod of the corpus shows ${row.id}`);
    }
  });

  test("every row of docs/compatibility.md is met by a Pod: of this corpus, of the peers' own fixtures, or says why none can", () => {
    const met = rowsMet(reports);
    const fixtures = join(ROOT, 'test/fixtures/peers');
    const used = new Set<string>();
    for (const peer of readdirSync(fixtures))
      for (const file of readdirSync(join(fixtures, peer), { recursive: true }) as string[])
        if (file.endsWith('.yaml')) {
          const f = parse(readFileSync(join(fixtures, peer, file), 'utf8'));
          for (const d of [
            ...(f.differences ?? []),
            ...(f.cases ?? []).flatMap((c: { differences: string[] }) => c.differences),
          ])
            used.add(d);
        }
    for (const id of documented) {
      const line = compatibility.split('\n').find((l) => l.startsWith(`| \`${id}\` |`))!;
      assert.ok(
        met.has(id) || used.has(id) || /\(no (fixture|Pod):/.test(line),
        `docs/compatibility.md row ${id}: no Pod shows it and it does not say why none can`,
      );
    }
  });

  test("docs/compatibility.md's table is this run's: Pods, identical, listed and unlisted per configuration", () => {
    const table = compatibility.slice(compatibility.indexOf('| peer / configuration | Pods |'));
    const rows = [...table.matchAll(/^\| ([a-z]+\/[a-z+-]+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$/gm)].map((m) =>
      m.slice(1).join(' '),
    );
    const count = (r: ConfigReport, k: string) => r.pods.filter((p) => p.outcome.kind === k).length;
    assert.deepEqual(
      rows,
      reports.map((r) =>
        [r.config.id, r.pods.length, count(r, 'identical'), count(r, 'listed'), count(r, 'unlisted')].join(' '),
      ),
    );
    const total = corpus.reduce((n, f) => n + f.pods.length, 0);
    assert.match(compatibility, new RegExp(`corpus\\s+\\(\`test/fixtures/peer-diff/corpus/\`, ${total} Pods\\)`));
  });

  test('the recordings are of the pinned versions and hold an answer for every Pod of every configuration', () => {
    const versions = pinnedVersions();
    for (const peer of RECORDED) {
      const rec = loadRecording(peer)!;
      assert.equal(rec.version, versions[peer]);
      for (const config of CONFIGS.filter((c) => c.peer === peer)) {
        const cloud = peer === 'azure' ? 'azure' : 'gcp';
        const want = corpus
          .filter((f) => f.cloud === cloud)
          .flatMap((f) => f.pods.map((p) => `${f.namespace}/${p.metadata!.name}`));
        assert.deepEqual(Object.keys(rec.answers[config.id]).sort(), want.sort(), config.id);
      }
    }
  });
});

/** The AWS peer processes started against this control plane's kubeconfig that are still running. */
function peersRunningOn(cp: ControlPlane): string[] {
  const mine = `--kubeconfig=${cp.kubeconfigPath}`;
  return readdirSync('/proc')
    .filter((pid) => /^\d+$/.test(pid))
    .flatMap((pid) => {
      try {
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return argv.includes(mine) && argv.includes('--in-cluster=false') ? [pid] : [];
      } catch {
        return []; // gone meanwhile
      }
    });
}
