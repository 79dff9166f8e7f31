// The release: `npm run release -- --registry HOST/PATH` builds the image for linux/amd64 and
// linux/arm64 from the Dockerfile (nothing arm64 runs: the bundle is made once on this machine,
// the arm64 image is the arm64 root filesystem, assembled from the lock, plus that bundle), pushes
// both and a multi-arch index to HOST/PATH/workload-identity-webhook:VERSION, then pushes the
// chart, released with that index's digest, to oci://HOST/PATH/charts/workload-identity-webhook:VERSION,
// and prints the digests. VERSION is package.json's: it is the chart's version and appVersion, the
// image's label and tag, and what `workload-identity-webhook --version` prints.
//
//   npm run release -- --registry HOST/PATH [--plain-http] [--json] [--sign keyless|KEY] [--sbom FILE]
//     --sign: cosign signs the index and the chart and attests the SBOM on the index
//     (scripts/release-sign.ts); keyless in the release workflow, a key pair elsewhere;
//     --sbom: where the SBOM (CycloneDX) is written (default: a temporary file, removed after signing).
//   node scripts/release.ts --sync-chart      writes package.json's version into Chart.yaml
//                                             (the `version` script: `npm version` runs it)
//
// Log in first (`buildah login HOST`, `helm registry login HOST`). Needs root and buildah, as
// scripts/provide-images.sh; helm from $HELM, the PATH, or scripts/provide-binaries.sh. The build
// stages run on the Dockerfile's pinned node:24-bookworm-slim from Docker Hub, or on NODE_IMAGE:
// without Docker Hub, `NODE_IMAGE=$(bash scripts/base-image.sh) npm run release -- ...`.
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Document, Scalar, parseDocument } from 'yaml';
import { exec, scriptVars, tool } from './exec.ts';
import { type Signed, type Signer, signRelease } from './release-sign.ts';

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '..');
export const CHART_DIR = join(REPO, 'charts/workload-identity-webhook');
export const IMAGE_NAME = 'workload-identity-webhook';
export const PLATFORMS = ['linux/amd64', 'linux/arm64'] as const;
const CACHE =
  process.env.WIW_CACHE_DIR ??
  join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'workload-identity-webhook');
const STORAGE = join(CACHE, 'containers');

/** A registry host (with an optional port) and path: what goes into image references and shell commands. */
const REGISTRY = /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(\/[a-z0-9]+([._-][a-z0-9]+)*)*$/;

export interface Release {
  version: string;
  image: { repository: string; tag: string; digest: string; platforms: Record<string, string> };
  chart: { reference: string; version: string; digest: string };
  /** With --sign: what cosign signed, and the SBOM it attested. */
  signatures?: Signed;
}

export function packageVersion(): string {
  const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version))
    throw new Error(`package.json's version ${version} is not SemVer`);
  return version;
}

/** Writes `version` into a chart's Chart.yaml (version and appVersion), keeping its comments. */
export function setChartVersion(
  chartDir: string,
  version: string,
  images?: { image: string; platforms: string[] },
): void {
  const file = join(chartDir, 'Chart.yaml');
  const doc = parseDocument(readFileSync(file, 'utf8'));
  doc.set('version', version);
  doc.set('appVersion', version);
  if (images) {
    // Artifact Hub lists the images a chart runs (a YAML list in a string): the released one, by digest.
    const list = new Document([{ name: IMAGE_NAME, image: images.image, platforms: images.platforms }]);
    const text = doc.createNode(list.toString()) as Scalar;
    text.type = Scalar.BLOCK_LITERAL;
    doc.setIn(['annotations', 'artifacthub.io/images'], text);
  }
  writeFileSync(file, doc.toString({ lineWidth: 0 }));
}

/** Points a chart's values at the released image: repository, tag (for people) and digest (what is pulled). */
export function setChartImage(chartDir: string, image: { repository: string; tag: string; digest: string }): void {
  const file = join(chartDir, 'values.yaml');
  const doc = parseDocument(readFileSync(file, 'utf8'));
  doc.setIn(['image', 'repository'], image.repository);
  doc.setIn(['image', 'tag'], image.tag);
  doc.setIn(['image', 'digest'], image.digest);
  writeFileSync(file, doc.toString({ lineWidth: 0 }));
}

/** buildah on the project's storage, as scripts/image-lib.sh runs it. */
const storageArgs = (): string[] => [
  '--root',
  join(STORAGE, 'storage'),
  '--runroot',
  join(STORAGE, 'run'),
  '--storage-driver',
  'overlay',
];
const buildah = (args: string[]): Promise<string> => exec('buildah', [...storageArgs(), ...args]);

const helmBinary = (): Promise<string> => tool('helm', 'HELM', 'scripts/provide-binaries.sh', ['version', '--short']);

const arch = (platform: string): string => platform.split('/')[1];

/**
 * Builds the image of each platform from the Dockerfile (scripts/build-image.sh, as the tests'
 * image is built); returns the local names. NODE_IMAGE, if set, is the build stages' image (a
 * machine without Docker Hub passes the local stand-in of scripts/base-image.sh).
 */
async function buildImages(version: string): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const platform of PLATFORMS) {
    const name = `localhost/${IMAGE_NAME}-release:${version}-${arch(platform)}`;
    process.stderr.write(`release: building ${platform}\n`);
    await scriptVars('scripts/build-image.sh', [platform, name]);
    names.set(platform, name);
  }
  return names;
}

/** Pushes each platform's image and the index naming them; returns the digests. */
async function pushImages(
  names: Map<string, string>,
  repository: string,
  version: string,
  tls: string[],
): Promise<Release['image']> {
  const work = mkdtempSync(join(tmpdir(), 'wiw-release-'));
  try {
    const platforms: Record<string, string> = {};
    for (const [platform, name] of names) {
      const digestFile = join(work, `${arch(platform)}.digest`);
      // Each platform under its own tag too (VERSION-ARCH): the index below names them by digest.
      await buildah([
        'push',
        '--quiet',
        '--format',
        'oci',
        ...tls,
        '--digestfile',
        digestFile,
        name,
        `docker://${repository}:${version}-${arch(platform)}`,
      ]);
      platforms[platform] = readFileSync(digestFile, 'utf8').trim();
    }
    const list = `localhost/${IMAGE_NAME}-release:${version}`;
    const revision = (
      await run('git', ['rev-parse', 'HEAD'], { cwd: REPO }).catch(() => ({ stdout: '' }))
    ).stdout.trim();
    // A list left by an earlier run of this version (its absence is no error).
    await run('buildah', [...storageArgs(), 'manifest', 'rm', list]).catch(() => {});
    await buildah(['manifest', 'create', list]);
    for (const [platform, digest] of Object.entries(platforms)) {
      await buildah([
        'manifest',
        'add',
        ...tls,
        '--os',
        'linux',
        '--arch',
        arch(platform),
        ...(arch(platform) === 'arm64' ? ['--variant', 'v8'] : []),
        // The commit it was built from, on the index (not in the image: a commit that changes
        // nothing of the image leaves its digest as it was).
        ...(revision ? ['--annotation', `org.opencontainers.image.revision=${revision}`] : []),
        list,
        `docker://${repository}@${digest}`,
      ]);
    }
    const digestFile = join(work, 'index.digest');
    await buildah([
      'manifest',
      'push',
      '--quiet',
      '--format',
      'oci',
      ...tls,
      '--digestfile',
      digestFile,
      list,
      `docker://${repository}:${version}`,
    ]);
    return { repository, tag: version, digest: readFileSync(digestFile, 'utf8').trim(), platforms };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Packages the chart with the version and the image digest, and pushes it; returns its reference and digest. */
async function pushChart(
  image: Release['image'],
  registry: string,
  version: string,
  plainHttp: boolean,
): Promise<Release['chart']> {
  const helm = await helmBinary();
  const work = mkdtempSync(join(tmpdir(), 'wiw-release-chart-'));
  try {
    const dir = join(work, 'workload-identity-webhook');
    cpSync(CHART_DIR, dir, { recursive: true });
    setChartVersion(dir, version, {
      image: `${image.repository}:${image.tag}@${image.digest}`,
      platforms: Object.keys(image.platforms),
    });
    setChartImage(dir, image);
    await exec(helm, ['package', dir, '--destination', work]);
    const tgz = readdirSync(work).find((f) => f.endsWith('.tgz'))!;
    const remote = `oci://${registry}/charts`;
    // helm prints "Pushed: ..." and "Digest: sha256:..." on stderr.
    const { stdout, stderr } = await run(helm, [
      'push',
      join(work, tgz),
      remote,
      ...(plainHttp ? ['--plain-http'] : []),
    ]);
    const digest = /Digest: (sha256:[0-9a-f]{64})/.exec(stdout + stderr)?.[1];
    if (!digest) throw new Error(`helm push printed no digest:\n${stdout}${stderr}`);
    return { reference: `${remote}/workload-identity-webhook`, version, digest };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

export async function release(
  registry: string,
  options: { plainHttp: boolean; sign?: Signer; sbomFile?: string },
): Promise<Release> {
  if (!REGISTRY.test(registry))
    throw new Error(`--registry ${JSON.stringify(registry)} is not HOST[:PORT]/PATH in lowercase`);
  const version = packageVersion();
  const tls = options.plainHttp ? ['--tls-verify=false'] : [];
  const names = await buildImages(version);
  const image = await pushImages(names, `${registry}/${IMAGE_NAME}`, version, tls);
  const chart = await pushChart(image, registry, version, options.plainHttp);
  if (!options.sign) return { version, image, chart };
  const work = mkdtempSync(join(tmpdir(), 'wiw-release-sbom-'));
  try {
    const signatures = await signRelease(
      {
        image: `${image.repository}@${image.digest}`,
        chart: `${chart.reference.slice('oci://'.length)}@${chart.digest}`,
      },
      version,
      options.sign,
      { plainHttp: options.plainHttp, sbomFile: options.sbomFile ?? join(work, 'sbom.cdx.json') },
    );
    if (!options.sbomFile) delete signatures.sbom.file;
    return { version, image, chart, signatures };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function describe(r: Release): string {
  const lines = [
    `released workload-identity-webhook ${r.version}`,
    `image  ${r.image.repository}:${r.image.tag}@${r.image.digest}  (index)`,
    ...Object.entries(r.image.platforms).map(([p, d]) => `       ${p.padEnd(12)} ${d}`),
    `chart  ${r.chart.reference}:${r.chart.version}@${r.chart.digest}`,
    ...(r.signatures
      ? [
          `signed ${r.signatures.signer === 'keyless' ? 'keyless' : 'with the key'}: the index and the chart; SBOM attested on the index (${r.signatures.sbom.components} components)`,
        ]
      : []),
    '',
    'install:',
    `  helm install workload-identity-webhook ${r.chart.reference} --version ${r.chart.version} \\`,
    '    --namespace workload-identity-webhook --create-namespace',
  ];
  return `${lines.join('\n')}\n`;
}

async function main(argv: string[]): Promise<void> {
  if (argv.includes('--sync-chart')) {
    setChartVersion(CHART_DIR, packageVersion());
    return;
  }
  const valued = ['--registry', '--sign', '--sbom'];
  const value = (flag: string): string | undefined => {
    const at = argv.indexOf(flag);
    return at >= 0 ? argv[at + 1] : undefined;
  };
  const isValue = (i: number): boolean => i > 0 && valued.includes(argv[i - 1]);
  const unknown = argv.filter(
    (a, i) => !isValue(i) && (!a.startsWith('--') || ![...valued, '--plain-http', '--json'].includes(a)),
  );
  const registry = value('--registry');
  const missing = valued.some((f) => argv.includes(f) && value(f) === undefined);
  if (!registry || missing || unknown.length > 0) {
    process.stderr.write(
      'usage: npm run release -- --registry HOST[:PORT]/PATH [--plain-http] [--json] [--sign keyless|KEY] [--sbom FILE]\n',
    );
    process.exit(2);
  }
  const values = { registry, sign: value('--sign'), sbom: value('--sbom'), json: argv.includes('--json') };
  const sign: Signer | undefined =
    values.sign === undefined ? undefined : values.sign === 'keyless' ? { keyless: true } : { key: values.sign };
  if (sign && 'key' in sign && !existsSync(sign.key))
    throw new Error(`--sign ${JSON.stringify(sign.key)}: no such key file (or say --sign keyless)`);
  const result = await release(values.registry, {
    plainHttp: argv.includes('--plain-http'),
    sign,
    sbomFile: values.sbom === undefined ? undefined : resolve(values.sbom),
  });
  process.stdout.write(values.json ? `${JSON.stringify(result, null, 2)}\n` : describe(result));
}

if (import.meta.main) {
  main(process.argv.slice(2)).catch((err: Error) => {
    process.stderr.write(`release: ${err.message}\n`);
    process.exit(1);
  });
}
