// node bench/cel-conformance.ts [--candidates DIR]: scores CEL evaluators for JavaScript on a
// slice of the cel-spec conformance data (test/support/cel-conformance.ts): @bufbuild/cel, which
// tenant policy uses, and, when DIR holds them (npm install --prefix DIR
// @marcbachmann/cel-js@8.0.0 cel-js@0.8.2), the two other candidates. Figures: docs/policy.md.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { bufbuild, conformanceSlice, score, type Candidate, type Canonical } from '../test/support/cel-conformance.ts';

const { values: opts } = parseArgs({
  options: { candidates: { type: 'string' }, failures: { type: 'boolean', default: false } },
});

async function load(name: string): Promise<Record<string, unknown> | undefined> {
  if (!opts.candidates) return undefined;
  try {
    const path = createRequire(join(opts.candidates, 'node_modules', 'x.js')).resolve(name);
    return (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch {
    console.log(`(${name} not found under ${opts.candidates})`);
    return undefined;
  }
}

type Fn = (expr: string, vars?: Record<string, unknown>) => unknown;

function marcbachmann(mod: Record<string, unknown>, permissive: boolean): Candidate {
  const evaluate = mod.evaluate as Fn;
  const Env = mod.Environment as new (o: object) => { evaluate: Fn };
  const env = new Env({
    unlistedVariablesAreDyn: true,
    homogeneousAggregateLiterals: false,
    enableOptionalTypes: true,
  });
  const run = permissive ? (e: string, v: Record<string, unknown>) => env.evaluate(e, v) : evaluate;
  const Uint = (evaluate('0u') as object).constructor as new (v: bigint) => { value: bigint };
  const Type = (evaluate('type(1)') as object).constructor as new () => { name: string };
  const toIn = ([t, v]: Canonical): unknown => {
    switch (t) {
      case 'uint':
        return new Uint(v as bigint);
      case 'bytes':
        return new Uint8Array(Buffer.from(v as string, 'hex'));
      case 'list':
        return (v as Canonical[]).map(toIn);
      case 'map': {
        const entries = v as [Canonical, Canonical][];
        return entries.every(([k]) => k[0] === 'string')
          ? Object.fromEntries(entries.map(([k, x]) => [k[1], toIn(x)]))
          : new Map(entries.map(([k, x]) => [toIn(k), toIn(x)]));
      }
      case 'type':
        throw new Error('a type as a binding');
      default:
        return v;
    }
  };
  const out = (v: unknown): Canonical => {
    if (typeof v === 'bigint') return ['int', v];
    if (v instanceof Uint) return ['uint', v.value];
    if (typeof v === 'number') return ['double', v];
    if (typeof v === 'string') return ['string', v];
    if (typeof v === 'boolean') return ['bool', v];
    if (v === null) return ['null', null];
    if (v instanceof Uint8Array) return ['bytes', Buffer.from(v).toString('hex')];
    if (Array.isArray(v)) return ['list', v.map(out)];
    if (v instanceof Map) return ['map', [...v.entries()].map(([k, x]) => [out(k), out(x)])];
    if (v instanceof Type) return ['type', v.name];
    if (v && typeof v === 'object' && [Object.prototype, null].includes(Object.getPrototypeOf(v)))
      return ['map', Object.entries(v).map(([k, x]) => [['string', k], out(x)])];
    return ['other', String(v)];
  };
  return {
    name: `@marcbachmann/cel-js 8.0.0${permissive ? ' (dyn variables, mixed literals, optionals)' : ' (defaults)'}`,
    evaluate: (expr, bindings) =>
      out(run(expr, Object.fromEntries(Object.entries(bindings).map(([k, v]) => [k, toIn(v)])))),
  };
}

function celJs(mod: Record<string, unknown>): Candidate {
  const evaluate = mod.evaluate as Fn;
  const toIn = ([t, v]: Canonical): unknown => {
    switch (t) {
      case 'int':
      case 'uint':
        return Number(v);
      case 'bytes':
        return new Uint8Array(Buffer.from(v as string, 'hex'));
      case 'list':
        return (v as Canonical[]).map(toIn);
      case 'map':
        return Object.fromEntries((v as [Canonical, Canonical][]).map(([k, x]) => [String(k[1]), toIn(x)]));
      case 'type':
        throw new Error('a type as a binding');
      default:
        return v;
    }
  };
  const out = (v: unknown): Canonical => {
    if (typeof v === 'number' || typeof v === 'bigint') return ['double', Number(v)];
    if (typeof v === 'string') return ['string', v];
    if (typeof v === 'boolean') return ['bool', v];
    if (v === null) return ['null', null];
    if (Array.isArray(v)) return ['list', v.map(out)];
    if (v && typeof v === 'object') return ['map', Object.entries(v).map(([k, x]) => [['string', k], out(x)])];
    return ['other', String(v)];
  };
  return {
    name: 'cel-js 0.8.2',
    numbersAreOneType: true,
    evaluate: (expr, bindings) =>
      out(evaluate(expr, Object.fromEntries(Object.entries(bindings).map(([k, v]) => [k, toIn(v)])))),
  };
}

const { cases, excluded, total } = conformanceSlice();
console.log(
  `cel-spec v0.25.1 conformance slice: ${total} cases in the chosen suites, ${cases.length} runnable without protobuf messages or a type checker (excluded: ${JSON.stringify(excluded)})`,
);
const candidates: Candidate[] = [bufbuild];
const marc = await load('@marcbachmann/cel-js');
if (marc) candidates.push(marcbachmann(marc, false), marcbachmann(marc, true));
const celjs = await load('cel-js');
if (celjs) candidates.push(celJs(celjs));

for (const c of candidates) {
  const s = score(c, cases);
  const pct = (x: { passed: number; failed: number }) =>
    `${x.passed}/${x.passed + x.failed} (${((100 * x.passed) / (x.passed + x.failed)).toFixed(1)}%)`;
  console.log(
    `\n${c.name}\n  core language: ${pct(s.core)}   extensions (strings, two-variable comprehensions): ${pct(s.extensions)}`,
  );
  console.log(
    '  ' +
      Object.entries(s.bySuite)
        .map(([k, v]) => `${k} ${v.passed}/${v.passed + v.failed}`)
        .join(', '),
  );
  if (opts.failures) for (const f of s.failures) console.log(`    FAIL ${f}`);
}
