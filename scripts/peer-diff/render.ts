// Renders the chart part of the differential harness's corpus: each chart of
// test/fixtures/peer-diff/charts.yaml, at its pinned ref, through `helm template` with the values
// given there for each cloud, into test/fixtures/peer-diff/corpus/<chart>-<cloud>.yaml: the
// ServiceAccounts and, for each workload, the Pod its template makes (a header names the chart,
// its version and repository, the ref and the values). Run it once when a pin or a value changes:
//
//   node scripts/peer-diff/render.ts [chart ...]
//
// The charts come from git snapshots of their repositories: WIW_CHART_REPOS names a folder holding
// <owner>+<name>/repo (bare git directories), default /work/.mirror. Helm is the cached one
// (scripts/provide-binaries.sh). Only the rendered Pods are committed, never the charts.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { resolveBinaries } from '../../test/harness/binaries.ts';

const ROOT = join(import.meta.dirname, '../..');
const SPEC = join(ROOT, 'test/fixtures/peer-diff/charts.yaml');
const OUT = join(ROOT, 'test/fixtures/peer-diff/corpus');

interface ChartSpec {
  chart: string;
  version: string;
  repository: string;
  ref: string;
  path: string;
  renders: { cloud: string; values: Record<string, unknown>; note?: string }[];
}

type Obj = { kind?: string; metadata?: Record<string, any>; spec?: Record<string, any> };

/** The Pod a workload's template makes, named as its controller would name one. */
function podOf(workload: Obj, namespace: string): Obj | undefined {
  const template = workload.kind === 'CronJob' ? workload.spec?.jobTemplate?.spec?.template : workload.spec?.template;
  if (!template?.spec) return undefined;
  const meta = template.metadata ?? {};
  return {
    metadata: {
      name: `${workload.metadata!.name}-${workload.kind!.toLowerCase()}`.slice(0, 63),
      namespace,
      ...(meta.labels ? { labels: meta.labels } : {}),
      ...(meta.annotations ? { annotations: meta.annotations } : {}),
    },
    spec: template.spec,
  };
}

function extract(spec: ChartSpec, repos: string, work: string): string {
  const gitDir = join(repos, spec.repository.replace('/', '+'), 'repo');
  if (!existsSync(gitDir))
    throw new Error(
      `${spec.repository}: no snapshot at ${gitDir}; set WIW_CHART_REPOS to a folder holding <owner>+<name>/repo`,
    );
  const archive = execFileSync('git', ['--git-dir', gitDir, 'archive', spec.ref, spec.path], { maxBuffer: 1 << 28 });
  execFileSync('tar', ['-x', '-C', work], { input: archive });
  const dir = join(work, spec.path);
  // Dependencies the values turn off are not vendored in the repository; helm would refuse them.
  const chartFile = join(dir, 'Chart.yaml');
  const chart = parse(readFileSync(chartFile, 'utf8'));
  if (chart.dependencies) {
    delete chart.dependencies;
    writeFileSync(chartFile, stringify(chart));
  }
  return dir;
}

async function main(): Promise<void> {
  const only = new Set(process.argv.slice(2));
  const specs = (parse(readFileSync(SPEC, 'utf8')) as ChartSpec[]).filter((s) => !only.size || only.has(s.chart));
  const repos = process.env.WIW_CHART_REPOS ?? '/work/.mirror';
  const { helm } = await resolveBinaries();
  const helmVersion = execFileSync(helm, ['version', '--short']).toString().trim();
  mkdirSync(OUT, { recursive: true });
  for (const spec of specs) {
    const work = mkdtempSync(join(tmpdir(), 'wiw-chart-'));
    try {
      const dir = extract(spec, repos, work);
      for (const render of spec.renders) {
        const namespace = `${spec.chart}-${render.cloud}`.slice(0, 63);
        const valuesFile = join(work, `${render.cloud}.values.json`);
        writeFileSync(valuesFile, JSON.stringify(render.values));
        const manifest = execFileSync(
          helm,
          ['template', spec.chart, dir, '--namespace', namespace, '--values', valuesFile, '--kube-version', '1.34.0'],
          { maxBuffer: 1 << 28 },
        ).toString();
        const objects = parseAllDocuments(manifest)
          .map((d) => d.toJS() as Obj)
          .filter(Boolean);
        const serviceAccounts = objects
          .filter((o) => o.kind === 'ServiceAccount')
          .map((o) => ({ metadata: { name: o.metadata!.name, annotations: o.metadata!.annotations ?? {} } }));
        const pods = objects
          .filter((o) => ['Deployment', 'DaemonSet', 'StatefulSet', 'Job', 'CronJob'].includes(o.kind ?? ''))
          .map((o) => podOf(o, namespace))
          .filter((p) => p !== undefined);
        const header = [
          `# Rendered by scripts/peer-diff/render.ts (${helmVersion}): chart ${spec.chart} ${spec.version}`,
          `# from ${spec.repository} (${spec.path} at ${spec.ref}), with the values below. Do not edit.`,
        ].join('\n');
        const body = {
          origin: { chart: spec.chart, version: spec.version, repository: spec.repository, ref: spec.ref },
          cloud: render.cloud,
          ...(render.note ? { note: render.note } : {}),
          values: render.values,
          namespace,
          serviceAccounts,
          pods,
        };
        const file = join(OUT, `${namespace}.yaml`);
        writeFileSync(file, `${header}\n${stringify(body, { lineWidth: 0 })}`);
        console.log(`${file}: ${pods.length} Pods, ${serviceAccounts.length} ServiceAccounts`);
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
}

await main();
