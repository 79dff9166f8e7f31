// Bundles the CLI and server for the image: src/cli.ts and everything it imports, production
// dependencies included, as a few ES modules (the lazily imported commands stay separate chunks),
// so the image needs no node_modules at run time. Also writes the licences of the bundled
// packages beside the code, as their licences ask. Like dist/, it goes beside package.json
// (the image has /app/package.json and /app/dist/).
//
//   node scripts/bundle.ts [OUTDIR]   (default: bundle/)
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join, resolve } from 'node:path';
import { build, type Metafile } from 'esbuild';

const REPO = resolve(import.meta.dirname, '..');
/**
 * Optional packages dependencies load inside try/catch when present (ws: bufferutil and
 * utf-8-validate, native speed-ups; debug: supports-color). None is installed, so they stay
 * unresolved imports and the dependency takes its plain JavaScript path.
 */
export const OPTIONAL_EXTERNALS = ['bufferutil', 'utf-8-validate', 'supports-color'];

export async function bundle(outdir: string): Promise<Metafile> {
  rmSync(outdir, { recursive: true, force: true });
  const result = await build({
    absWorkingDir: REPO,
    entryPoints: ['src/cli.ts'],
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    // Smaller, but identifiers stay: stack traces keep the source's function names. No keepNames:
    // its __name() call ran each time a closure was made (pino, fastify hooks), 1.6 % of the CPU
    // per review in a profile, to keep the name of the few functions esbuild renames (`parse2`).
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    // Every file one folder below package.json, as the sources are in src/: a module that reads
    // ../package.json (the version) finds it from whichever file it ends up in.
    chunkNames: '[name]-[hash]',
    // The CommonJS dependencies require() Node's built-in modules; ES module output has no require.
    banner: {
      js: "import { createRequire as __wiwRequire } from 'node:module'; const require = __wiwRequire(import.meta.url);",
    },
    metafile: true,
    logLevel: 'warning',
  });
  const unexpected = externals(result.metafile).filter((p) => !isBuiltin(p) && !OPTIONAL_EXTERNALS.includes(p));
  if (unexpected.length > 0) throw new Error(`the bundle would load these from node_modules: ${unexpected.join(', ')}`);
  writeFileSync(join(outdir, 'THIRD-PARTY-NOTICES.txt'), notices(result.metafile));
  return result.metafile;
}

/** The imports the bundle leaves to Node.js at run time. */
export function externals(meta: Metafile): string[] {
  const out = new Set<string>();
  for (const output of Object.values(meta.outputs)) for (const i of output.imports) if (i.external) out.add(i.path);
  return [...out].sort();
}

/** The packages (name@version, folder) whose code is in the bundle. */
export function bundledPackages(meta: Metafile): Map<string, string> {
  const packages = new Map<string, string>();
  for (const input of Object.keys(meta.inputs)) {
    const m = /^(.*node_modules\/((?:@[^/]+\/)?[^/]+))\//.exec(input);
    if (!m) continue;
    const dir = join(REPO, m[1]);
    const { name, version } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
      name: string;
      version: string;
    };
    packages.set(`${name}@${version}`, dir);
  }
  return new Map([...packages].sort(([a], [b]) => a.localeCompare(b)));
}

function notices(meta: Metafile): string {
  const parts = ['Third-party software bundled in this program, with the licence each is distributed under.\n'];
  for (const [id, dir] of bundledPackages(meta)) {
    const file = readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
    const license = (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { license?: string }).license;
    if (!file && !license) throw new Error(`${id} states no licence`);
    parts.push(`\n=== ${id} (${license ?? 'see below'})\n`);
    if (file) parts.push(`\n${readFileSync(join(dir, file), 'utf8').trim()}\n`);
  }
  return parts.join('');
}

if (import.meta.main) {
  const outdir = resolve(process.argv[2] ?? join(REPO, 'bundle'));
  const meta = await bundle(outdir);
  const bytes = Object.values(meta.outputs).reduce((n, o) => n + o.bytes, 0);
  console.error(
    `bundle: ${Object.keys(meta.outputs).length} files, ${(bytes / 1e6).toFixed(1)} MB, ${bundledPackages(meta).size} packages, in ${outdir}`,
  );
  if (!existsSync(join(outdir, 'cli.js'))) throw new Error('no cli.js in the bundle');
}
