// The chart's values.yaml is the one source of its values: the comment above each key describes
// it, and `# @schema {...}` lines (a YAML flow map, merged into what the default implies) add
// the constraints. From it this writes values.schema.json (a description for every value) and the
// Values table of the chart README. `npm run chart-docs` regenerates both after values.yaml
// changes; `npm run chart-docs -- --check` (and test/e2e/chart-values.test.ts) fail when they are stale.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse, stringify } from 'yaml';
import { settings } from '../src/config.ts';
import { envName, IMAGE_REFERENCE, type Setting } from '../src/settings.ts';
import { requestorSettings } from '../src/token-requestor/config.ts';

export const CHART = resolve(import.meta.dirname, '../charts/workload-identity-webhook');
const README_START = '<!-- Generated from values.yaml by `npm run chart-docs`: edit the comments there. -->';
const README_END = '<!-- End of the generated table. -->';
/** Names an annotation may use for a pattern the code owns (`pattern: $IMAGE_REFERENCE`). */
const NAMED: Record<string, string> = { $IMAGE_REFERENCE: IMAGE_REFERENCE.source };

type Json = Record<string, any>;

/** One key of values.yaml: where it is, its default, its comment and its `@schema` annotations. */
export interface ValueKey {
  path: string[];
  value: unknown;
  description: string;
  annotation: Json;
  children: ValueKey[];
}

const KEY_LINE = /^( *)([A-Za-z0-9_./-]+):(?:\s|$)/;
const LIST_ITEM = /^( *)- /;
const COMMENT = /^\s*#\s?(.*)$/;

/**
 * The keys of values.yaml with the comment block right above each (a blank line ends a block).
 * Keys inside list items are part of the list's default, not values of their own.
 */
export function readValueKeys(text: string): ValueKey[] {
  const values = parse(text) as Json;
  const roots: ValueKey[] = [];
  const stack: { indent: number; key: ValueKey }[] = [];
  let comments: string[] = [];
  let listIndent = -1;
  for (const [i, line] of text.split('\n').entries()) {
    const comment = COMMENT.exec(line);
    if (comment) {
      comments.push(comment[1]);
      continue;
    }
    const item = LIST_ITEM.exec(line);
    const key = KEY_LINE.exec(line);
    if (item) listIndent = item[1].length;
    else if (key && (listIndent < 0 || key[1].length <= listIndent)) {
      listIndent = -1;
      const indent = key[1].length;
      while (stack.length > 0 && stack.at(-1)!.indent >= indent) stack.pop();
      const parent = stack.at(-1)?.key;
      const path = [...(parent?.path ?? []), key[2]];
      const node: ValueKey = { path, value: valueAt(values, path), ...describe(comments, path, i), children: [] };
      (parent?.children ?? roots).push(node);
      stack.push({ indent, key: node });
    }
    comments = [];
  }
  checkEveryKeyRead(values, roots);
  return roots;
}

function valueAt(values: Json, path: string[]): unknown {
  return path.reduce<any>((o, k) => o?.[k], values);
}

function describe(lines: string[], path: string[], index: number): { description: string; annotation: Json } {
  const annotation: Json = {};
  const text: string[] = [];
  for (const line of lines) {
    const m = /^@schema\s+(.*)$/.exec(line);
    if (!m) text.push(line.trim());
    else {
      const parsed = parse(m[1]);
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
        throw new Error(`values.yaml line ${index}: @schema of ${path.join('.')} is not a flow map: ${m[1]}`);
      merge(annotation, named(parsed));
    }
  }
  return { description: text.join(' ').replace(/\s+/g, ' ').trim(), annotation };
}

function named(v: unknown): any {
  if (typeof v === 'string') return NAMED[v] ?? v;
  if (Array.isArray(v)) return v.map(named);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, named(x)]));
  return v;
}

function merge(into: Json, from: Json): Json {
  for (const [k, v] of Object.entries(from)) {
    const mine = into[k];
    if (mine && typeof mine === 'object' && !Array.isArray(mine) && v && typeof v === 'object' && !Array.isArray(v))
      merge(mine, v);
    else into[k] = v;
  }
  return into;
}

/** The line reader and the YAML parser agree on every key (a key the reader missed has no comment). */
function checkEveryKeyRead(values: Json, roots: ValueKey[], prefix = ''): void {
  const read = new Set(roots.map((r) => r.path.at(-1)));
  for (const [k, v] of Object.entries(values)) {
    if (!read.has(k)) throw new Error(`values.yaml: ${prefix}${k} was not read; write it as "key: value" on one line`);
    if (v && typeof v === 'object' && !Array.isArray(v))
      checkEveryKeyRead(v, roots.find((r) => r.path.at(-1) === k)!.children, `${prefix}${k}.`);
  }
}

/** `--flag` of a value that feeds one: `config.*` (templates/_helpers.tpl's table) and tokenRequestor.config.*. */
function flagOf(path: string[], configFlags: Map<string, string>): string | undefined {
  if (path.length === 2 && path[0] === 'config') return configFlags.get(path[1]);
  if (path.length === 3 && path[0] === 'tokenRequestor' && path[1] === 'config')
    return (requestorSettings as Record<string, Setting<unknown>>)[path[2]]?.flag;
  return undefined;
}

/** The flag table of templates/_helpers.tpl (wiw.configFlags): config key -> serve flag. */
export function configFlags(
  helpers = readFileSync(join(CHART, 'templates/_helpers.tpl'), 'utf8'),
): Map<string, string> {
  const body = /define "wiw\.configFlags" -\}\}\n([\s\S]*?)\{\{- end \}\}/.exec(helpers)?.[1];
  if (!body) throw new Error('templates/_helpers.tpl defines no wiw.configFlags');
  return new Map(Object.entries(parse(body) as Record<string, string>));
}

/**
 * A value's description: its comment; for a value that feeds a flag, `--flag:` first, and the
 * flag's own help when the comment says nothing more.
 */
export function descriptionOf(key: ValueKey, flags: Map<string, string>): string {
  const flag = flagOf(key.path, flags);
  if (!flag) return key.description;
  const help = [...Object.values(settings), ...Object.values(requestorSettings)].find(
    (s) => (s as Setting<unknown>).flag === flag,
  ) as Setting<unknown> | undefined;
  const text = key.description || (help ? `${help.description}.` : '');
  return `\`--${flag}\`: ${text}`;
}

function inferred(value: unknown): Json {
  if (value === null) return {};
  if (typeof value === 'boolean') return { type: 'boolean' };
  if (typeof value === 'number') return { type: Number.isInteger(value) ? 'integer' : 'number' };
  if (typeof value === 'string') return { type: 'string' };
  if (Array.isArray(value)) {
    const types = new Set(value.map((v) => inferred(v).type));
    const scalar = types.size === 1 && ['string', 'integer', 'boolean'].includes([...types][0]);
    return { type: 'array', ...(scalar && { items: { type: [...types][0] } }) };
  }
  return { type: 'object' };
}

function schemaOf(key: ValueKey, flags: Map<string, string>): Json {
  const description = descriptionOf(key, flags);
  if (!description) throw new Error(`values.yaml: ${key.path.join('.')} has no comment to describe it`);
  const node: Json = { ...inferred(key.value), description };
  if (key.children.length > 0) {
    node.properties = Object.fromEntries(key.children.map((c) => [c.path.at(-1), schemaOf(c, flags)]));
    node.additionalProperties = false;
  }
  return merge(node, structuredClone(key.annotation));
}

export function valuesSchema(keys: ValueKey[], flags = configFlags()): Json {
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'workload-identity-webhook values',
    description: 'Generated from values.yaml by `npm run chart-docs`: edit the comments there.',
    type: 'object',
    additionalProperties: false,
    properties: {
      global: {
        type: 'object',
        description: "Helm's global values, shared with parent charts; this chart reads none.",
      },
      ...Object.fromEntries(keys.map((k) => [k.path[0], schemaOf(k, flags)])),
    },
  };
}

/** The README's rows: one per value that is no map of further values, as the user sets it. */
function rows(keys: ValueKey[], flags: Map<string, string>): string[] {
  return keys.flatMap((k) => {
    if (k.children.length > 0) return rows(k.children, flags);
    const cell = (s: string) => s.replaceAll('|', '\\|');
    const link = (s: string) =>
      s.replace(/(?<![[/])docs\/([a-z-]+\.md)(#[a-z0-9-]+)?/g, '[docs/$1$2](../../docs/$1$2)');
    const value = stringify(k.value, { collectionStyle: 'flow', lineWidth: 0 }).trim();
    return [`| \`${k.path.join('.')}\` | \`${cell(value)}\` | ${cell(link(descriptionOf(k, flags)))} |`];
  });
}

export function valuesTable(keys: ValueKey[], flags = configFlags()): string {
  const unset = flagsWithoutValue(flags).map((f) => `\`--${f}\``);
  return [
    '| Value | Default | Description |',
    '| --- | --- | --- |',
    ...rows(keys, flags),
    '',
    `Flags of \`serve\` that no value sets (\`extraArgs\` passes them): ${unset.join(', ')}.`,
  ].join('\n');
}

/** Flags of `serve` neither a `config` key feeds nor a template sets (as its WIW_* variable). */
export function flagsWithoutValue(flags = configFlags()): string[] {
  const dir = join(CHART, 'templates');
  const templates = (readdirSync(dir, { recursive: true, withFileTypes: true }) as import('node:fs').Dirent[])
    .filter((f) => f.isFile())
    .map((f) => readFileSync(join(f.parentPath, f.name), 'utf8'))
    .join('\n');
  const fed = new Set(flags.values());
  return (Object.values(settings) as Setting<unknown>[])
    .map((s) => s.flag)
    .filter((f) => !fed.has(f) && !new RegExp(`\\b${envName(f)}\\b`).test(templates));
}

/** What values.schema.json and README.md should hold, from values.yaml. */
export function chartDocs(): { schema: string; readme: string } {
  const keys = readValueKeys(readFileSync(join(CHART, 'values.yaml'), 'utf8'));
  const readme = readFileSync(join(CHART, 'README.md'), 'utf8');
  const start = readme.indexOf(README_START);
  const end = readme.indexOf(README_END);
  if (start < 0 || end < start) throw new Error(`the chart README has no "${README_START}" ... "${README_END}"`);
  return {
    schema: JSON.stringify(valuesSchema(keys), null, 2) + '\n',
    readme: `${readme.slice(0, start + README_START.length)}\n${valuesTable(keys)}\n${readme.slice(end)}`,
  };
}

if (import.meta.main) {
  const docs = chartDocs();
  const files = { 'values.schema.json': docs.schema, 'README.md': docs.readme };
  const stale = Object.entries(files).filter(([f, text]) => readFileSync(join(CHART, f), 'utf8') !== text);
  if (process.argv.includes('--check')) {
    for (const [f] of stale)
      process.stderr.write(`charts/workload-identity-webhook/${f} is stale: npm run chart-docs\n`);
    process.exitCode = stale.length > 0 ? 1 : 0;
  } else for (const [f, text] of stale) writeFileSync(join(CHART, f), text);
}
