// Upgrade and uninstall as docs/install.md writes them: the commands are read from its sections
// "3. Upgrade" and "4. Uninstall" and run by bash as written, with only the placeholders replaced
// (the registry, the version, the release's name and namespace), so the docs and the tests cannot
// disagree. And the next release: a copy of the checkout with the next patch version and a
// changed CRD, which `npm run release` releases as N+1.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { parseDocument } from 'yaml';
import { resolveBinaries } from '../harness/binaries.ts';
import { scriptVars } from '../harness/node-images.ts';

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');
const CRD_FILE = 'charts/workload-identity-webhook/crds/workloadidentitypolicies.workload-identity-webhook.io.yaml';
/** The printer column the next release's CRD adds. */
export const NEXT_CRD_COLUMN = 'Upgraded';

/** The ```sh blocks of a `## ` section of docs/install.md whose heading starts with `heading`. */
export async function documentedBlocks(heading: string): Promise<string[]> {
  const doc = await readFile(join(REPO, 'docs/install.md'), 'utf8');
  const sections = doc.split(/^## /m);
  const section = sections.find((s) => s.startsWith(heading));
  if (!section) throw new Error(`docs/install.md has no section "## ${heading}"`);
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

/** Replaces each placeholder, and fails when one is absent: a reworded doc must be seen here. */
export function substitute(text: string, replacements: [RegExp, string][]): string {
  let out = text;
  for (const [pattern, value] of replacements) {
    if (!pattern.test(out)) throw new Error(`the documented commands no longer contain ${pattern}:\n${text}`);
    out = out.replace(new RegExp(pattern.source, `${pattern.flags.replace('g', '')}g`), value);
  }
  return out;
}

/** The placeholders of the docs' commands, as this test's install fills them. */
export function installPlaceholders(options: {
  chartRef?: string;
  plainHttp?: boolean;
  version?: string;
  release: string;
  namespace: string;
}): [RegExp, string][] {
  return [
    ...(options.chartRef
      ? ([
          [
            /oci:\/\/REGISTRY\/PATH\/charts\/workload-identity-webhook/,
            `${options.chartRef}${options.plainHttp ? ' --plain-http' : ''}`,
          ],
        ] as [RegExp, string][])
      : []),
    ...(options.version ? ([[/\bNEW\b/, options.version]] as [RegExp, string][]) : []),
    [/(helm (?:upgrade|uninstall)) workload-identity-webhook /, `$1 ${options.release} `],
    [/(--namespace|delete namespace) workload-identity-webhook\b/, `$1 ${options.namespace}`],
  ];
}

/** Runs commands with bash as a user's shell would, helm and kubectl on the PATH, against `kubeconfig`. */
export async function runDocumented(commands: string, kubeconfig: string): Promise<string> {
  const bin = await mkdtemp(join(tmpdir(), 'wiw-docs-bin-'));
  const kubectl = process.env.TEST_ASSET_KUBECTL ?? (await scriptVars('scripts/provide-binaries.sh')).KUBECTL;
  await symlink((await resolveBinaries()).helm, join(bin, 'helm'));
  await symlink(kubectl, join(bin, 'kubectl'));
  try {
    const { stdout, stderr } = await run('bash', ['-euo', 'pipefail', '-c', commands], {
      cwd: tmpdir(),
      maxBuffer: 32 << 20,
      env: {
        ...process.env,
        PATH: `${bin}:${process.env.PATH}`,
        KUBECONFIG: kubeconfig,
        HELM_CACHE_HOME: join(tmpdir(), 'wiw-helm-cache'),
        HELM_CONFIG_HOME: join(tmpdir(), 'wiw-helm-config'),
        HELM_DATA_HOME: join(tmpdir(), 'wiw-helm-data'),
      },
    });
    return stdout + stderr;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${commands}\nfailed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

/** The next patch version of a SemVer version (a pre-release is dropped). */
export function nextPatch(version: string): string {
  const [major, minor, patch] = version.split(/[.-]/).map(Number);
  return `${major}.${minor}.${patch + 1}`;
}

/**
 * A copy of the checkout (its tracked and untracked files, as they are now) as the next
 * release: package.json's version is the next patch and the policy CRD has one more printer
 * column. node_modules is the checkout's (linked: the release script runs from the copy).
 */
export async function nextReleaseCheckout(): Promise<{ dir: string; version: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'wiw-next-release-'));
  const { stdout } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: REPO,
    maxBuffer: 16 << 20,
  });
  for (const file of stdout.split('\0').filter((f) => f && existsSync(join(REPO, f)))) {
    await mkdir(dirname(join(dir, file)), { recursive: true });
    await cp(join(REPO, file), join(dir, file));
  }
  await symlink(join(REPO, 'node_modules'), join(dir, 'node_modules'));
  const pkg = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as { version: string };
  pkg.version = nextPatch(pkg.version);
  await writeFile(join(dir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  const crd = parseDocument(await readFile(join(dir, CRD_FILE), 'utf8'));
  const columns = crd.getIn(['spec', 'versions', 0, 'additionalPrinterColumns']) as { add(v: unknown): void };
  columns.add(
    crd.createNode({ name: NEXT_CRD_COLUMN, type: 'string', priority: 1, jsonPath: '.metadata.annotations.upgraded' }),
  );
  await writeFile(join(dir, CRD_FILE), crd.toString());
  return { dir, version: pkg.version };
}
