// A slice of the cel-spec conformance suite (v0.25.1, as @bufbuild/cel-spec ships it) and a
// runner that scores any CEL evaluator on it: test/unit/policy-cel.test.ts keeps the chosen library
// honest, bench/cel-conformance.ts compares the candidates (docs/policy.md has the figures).
import {
  celUint,
  isCelError,
  isCelList,
  isCelMap,
  isCelType,
  isCelUint,
  run,
  type CelInput,
  type CelValue,
} from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { tests } from '@bufbuild/cel-spec/testdata/conformance.js';

/** The language core a policy uses: literals, operators, comparisons, conversions, maps, lists, macros, strings, time. */
export const CORE_SUITES = [
  'basic',
  'comparisons',
  'conversions',
  'dynamic',
  'fields',
  'fp_math',
  'integer_math',
  'lists',
  'logic',
  'macros',
  'namespace',
  'parse',
  'plumbing',
  'string',
  'timestamps',
  'type_deductions',
];
/** Extensions: the strings library (Kubernetes CEL has it) and two-variable comprehensions. */
export const EXTENSION_SUITES = ['string_ext', 'macros2'];

/** [type, value]: what both the expected values and each evaluator's results are compared as. */
export type Canonical = [string, unknown];

interface Value {
  [key: string]: unknown;
}
export interface ConformanceCase {
  suite: string;
  name: string;
  expr: string;
  bindings: Record<string, Canonical>;
  /** undefined: an evaluation error is expected. */
  expected: Canonical | undefined;
}

type RawTest = {
  name: string;
  expr: string;
  value?: Value;
  evalError?: unknown;
  bindings?: Record<string, { value?: Value }>;
  container?: string;
  checkOnly?: boolean;
  typedResult?: unknown;
};
type RawSuite = { name: string; suites?: RawSuite[]; tests?: { original: RawTest }[] };

const MESSAGES = /TestAllTypes|google\.protobuf|cel\.expr|NestedMessage|NestedEnum|GlobalEnum|proto[23]\./;

function usesMessages(v: unknown): boolean {
  if (!v || typeof v !== 'object') return false;
  if ('objectValue' in v || 'enumValue' in v) return true;
  return Object.values(v).some(usesMessages);
}

/** Why a case is outside the slice: it needs protobuf messages, a type checker, or names no result. */
function excluded(t: RawTest): string | undefined {
  if (t.checkOnly || t.typedResult) return 'type-check only';
  if (t.container || MESSAGES.test(t.expr) || usesMessages(t.value) || usesMessages(t.bindings))
    return 'protobuf messages';
  if (t.value && typeof t.value.typeValue === 'string' && MESSAGES.test(t.value.typeValue)) return 'protobuf messages';
  if (t.bindings && Object.values(t.bindings).some((b) => !b.value)) return 'protobuf messages';
  if (!t.value && !t.evalError) return 'no expected value';
  return undefined;
}

export function canonical(v: Value): Canonical {
  if ('int64Value' in v) return ['int', BigInt(v.int64Value as string)];
  if ('uint64Value' in v) return ['uint', BigInt(v.uint64Value as string)];
  if ('doubleValue' in v) return ['double', Number(v.doubleValue)];
  if ('stringValue' in v) return ['string', v.stringValue];
  if ('boolValue' in v) return ['bool', v.boolValue];
  if ('bytesValue' in v) return ['bytes', Buffer.from(v.bytesValue as string, 'base64').toString('hex')];
  if ('nullValue' in v) return ['null', null];
  if ('listValue' in v) return ['list', ((v.listValue as { values?: Value[] }).values ?? []).map(canonical)];
  if ('mapValue' in v)
    return [
      'map',
      ((v.mapValue as { entries?: { key: Value; value: Value }[] }).entries ?? []).map((e) => [
        canonical(e.key),
        canonical(e.value),
      ]),
    ];
  if ('typeValue' in v) return ['type', v.typeValue];
  throw new Error(`unknown conformance value ${JSON.stringify(v)}`);
}

export function conformanceSlice(): { cases: ConformanceCase[]; excluded: Record<string, number>; total: number } {
  const wanted = new Set([...CORE_SUITES, ...EXTENSION_SUITES]);
  const cases: ConformanceCase[] = [];
  const reasons: Record<string, number> = {};
  let total = 0;
  const walk = (s: RawSuite, top: string) => {
    for (const { original: t } of s.tests ?? []) {
      if (!wanted.has(top)) continue;
      total++;
      const why = excluded(t);
      if (why) {
        reasons[why] = (reasons[why] ?? 0) + 1;
        continue;
      }
      const bindings = Object.fromEntries(Object.entries(t.bindings ?? {}).map(([k, b]) => [k, canonical(b.value!)]));
      cases.push({
        suite: top,
        name: t.name,
        expr: t.expr,
        bindings,
        expected: t.value ? canonical(t.value) : undefined,
      });
    }
    for (const c of s.suites ?? []) walk(c, top || c.name);
  };
  walk(tests as unknown as RawSuite, '');
  return { cases, excluded: reasons, total };
}

/** An evaluator under test: bindings and result in the canonical form; throwing counts as an evaluation error. */
export interface Candidate {
  name: string;
  /** cel-js has JavaScript numbers only: int, uint and double are compared by value. */
  numbersAreOneType?: boolean;
  evaluate(expr: string, bindings: Record<string, Canonical>): Canonical | { error: string };
}

export function equal(a: Canonical, b: Canonical, oneNumberType = false): boolean {
  const numeric = ['int', 'uint', 'double'];
  if (oneNumberType && numeric.includes(a[0]) && numeric.includes(b[0])) {
    return Number(a[1]) === Number(b[1]) || (Number.isNaN(Number(a[1])) && Number.isNaN(Number(b[1])));
  }
  if (a[0] !== b[0]) return false;
  switch (a[0]) {
    case 'double':
      return a[1] === b[1] || (Number.isNaN(a[1]) && Number.isNaN(b[1]));
    case 'list': {
      const x = a[1] as Canonical[];
      const y = b[1] as Canonical[];
      return x.length === y.length && x.every((v, i) => equal(v, y[i], oneNumberType));
    }
    case 'map': {
      const x = a[1] as [Canonical, Canonical][];
      const y = b[1] as [Canonical, Canonical][];
      return (
        x.length === y.length &&
        y.every(([k, v]) => x.some(([k2, v2]) => equal(k2, k, oneNumberType) && equal(v2, v, oneNumberType)))
      );
    }
    default:
      return a[1] === b[1];
  }
}

export interface Score {
  core: { passed: number; failed: number };
  extensions: { passed: number; failed: number };
  bySuite: Record<string, { passed: number; failed: number }>;
  failures: string[];
}

export function score(candidate: Candidate, cases: readonly ConformanceCase[]): Score {
  const s: Score = { core: { passed: 0, failed: 0 }, extensions: { passed: 0, failed: 0 }, bySuite: {}, failures: [] };
  for (const c of cases) {
    let out: Canonical | { error: string };
    try {
      out = candidate.evaluate(c.expr, c.bindings);
    } catch (err) {
      out = { error: String((err as Error)?.message ?? err) };
    }
    const ok =
      c.expected === undefined
        ? !Array.isArray(out)
        : Array.isArray(out) && equal(out, c.expected, candidate.numbersAreOneType);
    const bucket = CORE_SUITES.includes(c.suite) ? s.core : s.extensions;
    const suite = (s.bySuite[c.suite] ??= { passed: 0, failed: 0 });
    if (ok) {
      bucket.passed++;
      suite.passed++;
    } else {
      bucket.failed++;
      suite.failed++;
      s.failures.push(`${c.suite}/${c.name}: ${c.expr}`);
    }
  }
  return s;
}

/** @bufbuild/cel, the library tenant policy uses, with the strings extension as src/policy/cel.ts has it. */
export const bufbuild: Candidate = {
  name: '@bufbuild/cel',
  evaluate(expr, bindings) {
    const vars = Object.fromEntries(Object.entries(bindings).map(([k, v]) => [k, toBuf(v)]));
    const result = run(expr, vars, { funcs: strings });
    if (isCelError(result)) return { error: result.message };
    return fromBuf(result);
  },
};

function toBuf([type, v]: Canonical): CelInput {
  switch (type) {
    case 'uint':
      return celUint(v as bigint);
    case 'bytes':
      return new Uint8Array(Buffer.from(v as string, 'hex'));
    case 'list':
      return (v as Canonical[]).map(toBuf);
    case 'map':
      return new Map((v as [Canonical, Canonical][]).map(([k, x]) => [toBuf(k) as string, toBuf(x)]));
    case 'type':
      throw new Error('a type as a binding');
    default:
      return v as CelInput;
  }
}

function fromBuf(v: CelValue): Canonical {
  if (typeof v === 'bigint') return ['int', v];
  if (isCelUint(v)) return ['uint', v.value];
  if (typeof v === 'number') return ['double', v];
  if (typeof v === 'string') return ['string', v];
  if (typeof v === 'boolean') return ['bool', v];
  if (v === null) return ['null', null];
  if (v instanceof Uint8Array) return ['bytes', Buffer.from(v).toString('hex')];
  if (isCelList(v)) return ['list', [...v].map(fromBuf)];
  if (isCelMap(v)) return ['map', [...v.entries()].map(([k, x]) => [fromBuf(k as CelValue), fromBuf(x)])];
  if (isCelType(v)) return ['type', v.name];
  return ['other', String(v)];
}
