// docs/hardening.md repeats the limits' flags and defaults in its table: each row that names a
// flag must name a flag of src/config.ts, with its default; and its table of sizes states every
// bound of src/bounds.ts with its value.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import * as bounds from '../../src/bounds.ts';
import { settings } from '../../src/config.ts';

const DOC = readFileSync(resolve(import.meta.dirname, '../../docs/hardening.md'), 'utf8');

/** "6 MiB", "512", "5 s" as the flag's own unit (bytes, a count, or milliseconds for -ms flags). */
function asDefault(text: string, flag: string): number {
  const m = /^([\d.]+)\s*(MiB|KiB|s)?$/.exec(text.trim());
  if (!m) throw new Error(`cannot read default "${text}" of --${flag}`);
  const n = Number(m[1]);
  if (m[2] === 'MiB') return n * 2 ** 20;
  if (m[2] === 'KiB') return n * 2 ** 10;
  if (m[2] === 's') return flag.endsWith('-ms') ? n * 1000 : n;
  return n;
}

test("docs/hardening.md's table of limits names real flags with their defaults", () => {
  const table = DOC.split('## Memory is bounded by design')[1].split('\n\n')[1];
  const byFlag = new Map(Object.values(settings).map((s) => [s.flag, s.default]));
  const rows = table.split('\n').filter((l) => /^\| [^|]+ \| `--/.test(l));
  assert.ok(rows.length >= 7, `${rows.length} rows name a flag`);
  for (const row of rows) {
    const [, , flagCell, defaultCell] = row.split('|');
    const flag = /`--([a-z0-9-]+)`/.exec(flagCell)![1];
    assert.ok(byFlag.has(flag), `--${flag} is a flag of src/config.ts`);
    assert.equal(asDefault(defaultCell, flag), byFlag.get(flag), `the default of --${flag}`);
  }
});

test('docs/hardening.md states every bound of src/bounds.ts with its value', () => {
  const section = DOC.split('## Every value a review reads has a size')[1].split('\n## ')[0];
  const named = Object.entries(bounds).filter(([name]) => name.startsWith('MAX_'));
  assert.ok(named.length >= 10, `${named.length} bounds`);
  for (const [name, value] of named) {
    const stated = new RegExp(`(\\d+) [a-z ]*\\(\`${name}\`\\)`).exec(section);
    assert.ok(stated, `docs/hardening.md names ${name}`);
    assert.equal(Number(stated[1]), value, `the value of ${name}`);
  }
});
