// The release's signatures and SBOM (`npm run release -- --sign keyless|KEY --sbom FILE`): cosign
// signs the image index and the chart, each by digest, and attests the SBOM on the image index
// (an in-toto statement of type CycloneDX, signed the same way). Keyless in the release workflow
// (.github/workflows/release.yml: the workflow's GitHub OIDC identity gets a Fulcio certificate,
// and the signatures go to Rekor's transparency log); with a cosign key pair elsewhere
// (test/e2e/node-e2e.test.ts signs against a local registry, where no transparency log is reached).
//
// The SBOM is `npm sbom` of the production dependencies (what scripts/bundle.ts bundles, from
// package-lock.json) plus the runtime base's inputs as scripts/runtime-base.lock pins them (Node.js
// and the Debian packages), each under the platform it ships on.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { exec, tool } from './exec.ts';

const REPO = resolve(import.meta.dirname, '..');

/** Keyless (the CI's OIDC identity) or a cosign private key file (COSIGN_PASSWORD in the environment). */
export type Signer = { keyless: true } | { key: string };

export interface Signed {
  signer: 'keyless' | 'key';
  /** The references signed, by digest. */
  signed: string[];
  /** The SBOM attested on the image index: its format and how many components it lists. */
  sbom: { format: 'CycloneDX'; specVersion: string; components: number; file?: string };
}

interface CycloneDx {
  specVersion: string;
  metadata: { component: { name: string; version: string; purl?: string; 'bom-ref'?: string } };
  components: { type: string; name: string; version: string; purl: string; 'bom-ref': string; properties?: object[] }[];
}

/** The runtime base's pinned inputs as CycloneDX components (lines of scripts/runtime-base.lock). */
function runtimeComponents(): CycloneDx['components'] {
  const lock = join(REPO, 'scripts/runtime-base.lock');
  if (!existsSync(lock)) return [];
  const components: CycloneDx['components'] = [];
  for (const line of readFileSync(lock, 'utf8').split('\n')) {
    const [source, arch, name, version] = line.split(/\s+/);
    if (!['node', 'deb'].includes(source) || !version) continue;
    const purl =
      source === 'deb'
        ? `pkg:deb/debian/${name}@${encodeURIComponent(version)}?arch=${arch}&distro=debian-12`
        : `pkg:npm/${name}@${version}`;
    const platform = `linux/${arch}`;
    components.push({
      type: 'library',
      name,
      version,
      purl,
      'bom-ref': `${platform}/${name}@${version}`,
      properties: [{ name: 'workload-identity-webhook:platform', value: platform }],
    });
  }
  return components;
}

/** The release's SBOM: `npm sbom` of the production dependencies, plus the runtime base's inputs. */
export async function makeSbom(version: string): Promise<CycloneDx> {
  const npm = await exec('npm', ['sbom', '--omit', 'dev', '--package-lock-only', '--sbom-format', 'cyclonedx']);
  const sbom = JSON.parse(npm) as CycloneDx;
  // npm names the root after the checkout's folder; the release is the package.
  Object.assign(sbom.metadata.component, {
    name: 'workload-identity-webhook',
    version,
    'bom-ref': `workload-identity-webhook@${version}`,
  });
  sbom.components.push(...runtimeComponents());
  return sbom;
}

const cosignBinary = (): Promise<string> => tool('cosign', 'COSIGN', 'scripts/provide-cosign.sh', ['version']);

/** Signs the image index and the chart and attests the SBOM on the index; returns what it did. */
export async function signRelease(
  refs: { image: string; chart: string },
  version: string,
  signer: Signer,
  options: { plainHttp: boolean; sbomFile: string },
): Promise<Signed> {
  const cosign = await cosignBinary();
  const sbom = await makeSbom(version);
  writeFileSync(options.sbomFile, `${JSON.stringify(sbom, null, 2)}\n`);
  const how =
    'key' in signer
      ? // A key pair: no transparency log and no Sigstore services (none is reached from a local
        // registry's network; cosign 3 would otherwise fetch its signing config over TUF).
        ['--key', signer.key, '--use-signing-config=false', '--tlog-upload=false']
      : [];
  const registry = options.plainHttp ? ['--allow-http-registry', '--allow-insecure-registry'] : [];
  for (const ref of [refs.image, refs.chart]) {
    process.stderr.write(`release: signing ${ref}\n`);
    await exec(cosign, ['sign', '--yes', ...how, ...registry, ref]);
  }
  process.stderr.write(`release: attesting the SBOM on ${refs.image}\n`);
  await exec(cosign, [
    'attest',
    '--yes',
    ...how,
    ...registry,
    '--type',
    'cyclonedx',
    '--predicate',
    options.sbomFile,
    refs.image,
  ]);
  return {
    signer: 'key' in signer ? 'key' : 'keyless',
    signed: [refs.image, refs.chart],
    sbom: {
      format: 'CycloneDX',
      specVersion: sbom.specVersion,
      components: sbom.components.length,
      file: options.sbomFile,
    },
  };
}
