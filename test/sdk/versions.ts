// The SDK versions the proof pins: npm's in package.json, PyPI's in scripts/python-sdks.sh.
import { readFileSync } from 'node:fs';

const root = new URL('../../', import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
  devDependencies: Record<string, string>;
};
const script = readFileSync(new URL('scripts/python-sdks.sh', root), 'utf8');

export const pinnedVersions: Record<string, string> = {
  ...pkg.devDependencies,
  ...Object.fromEntries(
    [...script.matchAll(/^(?:REQUIREMENTS=')?([a-z0-9-]+)==([\w.]+)'?$/gm)].map((m) => [m[1], m[2]]),
  ),
};

/** Every SDK suite's first check: the SDK that ran is the pinned one; its versions are printed. */
export async function checkPinnedVersion(
  t: { diagnostic(message: string): void },
  sdk: { versions(): Promise<Record<string, string>>; stop(): Promise<void> },
  language: string,
  sdkName: string,
): Promise<void> {
  const versions = await sdk.versions();
  t.diagnostic(
    `${language}: ${Object.entries(versions)
      .map(([n, v]) => `${n} ${v}`)
      .join(', ')}`,
  );
  await sdk.stop();
  if (versions[sdkName] !== pinnedVersions[sdkName]) {
    throw new Error(`${sdkName} ${versions[sdkName]} ran; ${pinnedVersions[sdkName]} is pinned`);
  }
}
