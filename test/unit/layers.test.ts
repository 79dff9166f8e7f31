// The map is true and guarded: docs/development.md's Architecture section lists the layers of src/ top to
// bottom, and this test reads the import graph of src/ (value and type imports, re-exports and
// dynamic imports) and fails on any file the list does not place, on any import that runs up the
// list, and on any cycle. Outside src/clouds/, no code names a cloud.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { PROVIDER_NAMES } from '../../src/clouds/registry.ts';

const REPO = resolve(import.meta.dirname, '../..');
const SRC = join(REPO, 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

const files = sourceFiles(SRC).map((f) => relative(REPO, f));

/** Relative imports of a file, resolved to repository paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(REPO, file), 'utf8');
  const specifiers = [
    ...text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+'(\.[^']+)'/gms),
    ...text.matchAll(/\bimport\(\s*'(\.[^']+)'\s*\)/g),
  ].map((m) => m[1]);
  return specifiers.map((s) => relative(REPO, resolve(dirname(join(REPO, file)), s)));
}

const graph = new Map(files.map((f) => [f, importsOf(f)]));

/** docs/development.md's layers, top to bottom: each a list of `src/...` paths (a folder ends with /). */
function readmeLayers(): string[][] {
  const doc = readFileSync(join(REPO, 'docs/development.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Architecture'));
  const list = section.slice(0, section.indexOf('\n\n', section.indexOf('\n- ')));
  return list
    .split('\n')
    .filter((line) => line.startsWith('- '))
    .map((line) => [...line.matchAll(/`(src\/[^`]*)`/g)].map((m) => m[1]));
}

const layers = readmeLayers();

/** The layer of a file: the most specific entry that names it (a file beats its folder). */
function layerOf(file: string): number | undefined {
  let best: { layer: number; length: number } | undefined;
  layers.forEach((entries, layer) => {
    for (const entry of entries) {
      const hit = entry.endsWith('/') ? file.startsWith(entry) : file === entry;
      if (hit && (!best || entry.length > best.length)) best = { layer, length: entry.length };
    }
  });
  return best?.layer;
}

describe('the layers of src/', () => {
  test("docs/development.md's Architecture section lists the layers, and places every file of src/", () => {
    assert.ok(layers.length >= 8, `docs/development.md lists ${layers.length} layers`);
    const entries = layers.flat();
    assert.deepEqual(
      entries.filter((e, i) => entries.indexOf(e) !== i),
      [],
      'each path is named in one layer only',
    );
    assert.deepEqual(
      files.filter((f) => layerOf(f) === undefined),
      [],
    );
  });

  test('every import points down the list or stays in its layer', () => {
    const upward: string[] = [];
    for (const [file, deps] of graph)
      for (const dep of deps) if (graph.has(dep) && layerOf(dep)! < layerOf(file)!) upward.push(`${file} -> ${dep}`);
    assert.deepEqual(upward, []);
  });

  test('no cycles, value or type imports', () => {
    // Tarjan's strongly connected components.
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const cycles: string[][] = [];
    let next = 0;
    const visit = (v: string): void => {
      index.set(v, next);
      low.set(v, next++);
      stack.push(v);
      onStack.add(v);
      for (const w of graph.get(v) ?? []) {
        if (!graph.has(w)) continue;
        if (!index.has(w)) {
          visit(w);
          low.set(v, Math.min(low.get(v)!, low.get(w)!));
        } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
      if (low.get(v) !== index.get(v)) return;
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || graph.get(v)!.includes(v)) cycles.push(component.sort());
    };
    for (const f of files) if (!index.has(f)) visit(f);
    assert.deepEqual(cycles, []);
  });

  test('outside src/clouds/, no code names a cloud (comments and messages aside)', () => {
    const names = PROVIDER_NAMES.join('|');
    // A cloud's name as a string literal of its own: 'aws', "gcp", `azure`.
    const literal = new RegExp(`(['"\`])(${names})\\1`);
    const offenders: string[] = [];
    for (const file of files.filter((f) => !f.startsWith('src/clouds/'))) {
      readFileSync(join(REPO, file), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          const code = line
            .replace(/\/\/.*$/, '')
            .replace(/\/\*.*?(\*\/|$)/, '')
            .replace(/^\s*\*.*$/, '');
          if (literal.test(code) || /\b(aws|azure|gcp)[A-Z]\w*/.test(code.replace(/'[^']*'|`[^`]*`/g, '')))
            offenders.push(`${file}:${i + 1}: ${line.trim()}`);
        });
    }
    assert.deepEqual(offenders, []);
  });

  test("the generic cloud contract (clouds/types.ts, facts.ts) imports no cloud's folder (issue 33)", () => {
    const clouds = new RegExp(`^src/clouds/(${PROVIDER_NAMES.join('|')})/`);
    const offenders = ['src/clouds/types.ts', 'src/clouds/facts.ts'].flatMap((file) =>
      graph
        .get(file)!
        .filter((target) => clouds.test(target))
        .map((target) => `${file} -> ${target}`),
    );
    assert.deepEqual(offenders, []);
  });
});
