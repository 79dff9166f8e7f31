// CEL for tenant policy, on @bufbuild/cel (chosen for spec fidelity: docs/policy.md). An
// expression is parsed, checked against the variables below and planned once; evaluating the
// plan is a plain synchronous call of a few microseconds.
import {
  CelScalar,
  celEnv,
  celMap,
  isCelError,
  isCelList,
  isCelMap,
  isCelUint,
  mapType,
  parse,
  plan,
  type CelInput,
  type CelValue,
} from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { CLOUD_MODULES, type IdentityFieldOf } from '../clouds/index.ts';
import { PROVIDER_NAMES, type ProviderName } from '../clouds/registry.ts';
import { errorMessage } from '../errors.ts';

/** What a policy expression sees. Every field is always present: a missing label is an empty map, not an error. */
export interface PolicyVariables {
  namespaceObject: { metadata: { name: string; labels: Record<string, string> } };
  serviceAccount: { metadata: { name: string; namespace: string; annotations: Record<string, string> } };
  object: {
    apiVersion: string;
    kind: string;
    metadata: {
      name: string;
      generateName: string;
      namespace: string;
      labels: Record<string, string>;
      annotations: Record<string, string>;
    };
  };
  identity: IdentityVariable;
}

/** The requested identity, flattened across clouds (each adds its own fields); fields of another cloud are empty strings. */
type IdentityField = 'provider' | 'identityProvider' | IdentityFieldOf<ProviderName> | 'audience';
export const IDENTITY_FIELDS: readonly IdentityField[] = [
  'provider',
  'identityProvider',
  ...PROVIDER_NAMES.flatMap((name) => CLOUD_MODULES[name].policy.identityFields),
  'audience',
];
export type IdentityVariable = Record<IdentityField, string>;

// The shape of each variable, for the compile-time check of field names: a typo such as
// `identity.acount` is a compile error, not a denial at 3 a.m.
type Shape = 'string' | 'map' | { [field: string]: Shape };
const STRING_MAP: Shape = 'map';
const VARIABLE_SHAPES: Record<keyof PolicyVariables, Shape> = {
  namespaceObject: { metadata: { name: 'string', labels: STRING_MAP } },
  serviceAccount: { metadata: { name: 'string', namespace: 'string', annotations: STRING_MAP } },
  object: {
    apiVersion: 'string',
    kind: 'string',
    metadata: {
      name: 'string',
      generateName: 'string',
      namespace: 'string',
      labels: STRING_MAP,
      annotations: STRING_MAP,
    },
  },
  identity: Object.fromEntries(IDENTITY_FIELDS.map((f) => [f, 'string'])),
};
const VARIABLE_NAMES = Object.keys(VARIABLE_SHAPES);

type Expr = ReturnType<typeof parse>['expr'];

const DYN_MAP = mapType(CelScalar.STRING, CelScalar.DYN);
const env = celEnv({
  variables: { namespaceObject: DYN_MAP, serviceAccount: DYN_MAP, object: DYN_MAP, identity: DYN_MAP },
  // The strings extension, as Kubernetes' CEL has it: lowerAscii, split, replace, join, ...
  funcs: strings,
});

/** A JS view of a CEL result: strings, booleans, bigint ints, numbers, null, arrays and plain objects. */
type PlainValue = string | boolean | bigint | number | null | PlainValue[] | { [key: string]: PlainValue } | Uint8Array;

export interface Program {
  readonly source: string;
  /** Never throws: an evaluation error (missing key, no such overload, ...) comes back as `error`. */
  run(activation: Activation): { value: PlainValue } | { error: string };
}

declare const activationBrand: unique symbol;
/** The variables converted to CEL maps once, for every expression judging the same input. */
export type Activation = { readonly [activationBrand]: true };

/**
 * Converting plain objects to CEL maps once per input, instead of on every field access of every
 * expression, halves the cost of an evaluation (bench/policy.ts).
 */
export function activation(vars: PolicyVariables): Activation {
  const out: Record<string, CelInput> = {};
  for (const [name, value] of Object.entries(vars)) out[name] = toCelInput(value);
  // The brand: only this function makes an Activation (CEL maps, by variable name).
  return out as unknown as Activation;
}

function toCelInput(v: unknown): CelInput {
  if (v === null || typeof v !== 'object') return v as CelInput;
  return celMap(new Map(Object.entries(v).map(([k, x]) => [k, toCelInput(x)])));
}

/** Parses, checks and plans an expression; the error names the position and the problem. */
export function compileExpression(source: string): Program | { error: string } {
  if (typeof source !== 'string' || source.trim() === '') return { error: 'the expression is empty' };
  let parsed;
  try {
    parsed = parse(source);
  } catch (err) {
    return { error: parseErrorMessage(err) };
  }
  const problem = checkExpr(parsed.expr, new Set());
  if (problem) return { error: problem };
  let planned: (vars: Record<string, unknown>) => unknown;
  try {
    // The CEL library types a plan's input as its own activation; it takes the maps activation() made.
    planned = plan(env, parsed) as unknown as (vars: Record<string, unknown>) => unknown;
  } catch (err) {
    return { error: errorMessage(err) };
  }
  return {
    source,
    run(act) {
      let result: unknown;
      try {
        // The brand off again: an Activation is the maps by variable name.
        result = planned(act as unknown as Record<string, unknown>);
      } catch (err) {
        return { error: errorMessage(err) };
      }
      if (isCelError(result)) return { error: result.message };
      return { value: toPlain(result as CelValue) };
    },
  };
}

function parseErrorMessage(err: unknown): string {
  const e = err as Error & { rawMessage?: string; location?: { start?: { line: number; column: number } } };
  const at = e.location?.start;
  return at
    ? `syntax error at line ${at.line}, column ${at.column}: ${e.rawMessage ?? e.message}`
    : `syntax error: ${e.message}`;
}

/**
 * Walks the AST: every identifier is a declared variable (or a macro's own), every field
 * selected on a variable exists, every named function is known. Types beyond that are left to
 * the examples, which run every policy before it is used.
 */
function checkExpr(expr: Expr | undefined, bound: ReadonlySet<string>): string | undefined {
  if (!expr) return undefined;
  const kind = expr.exprKind;
  switch (kind.case) {
    case 'identExpr':
      if (bound.has(kind.value.name) || kind.value.name in VARIABLE_SHAPES) return undefined;
      return `unknown variable "${kind.value.name}"; the variables are ${VARIABLE_NAMES.join(', ')}`;
    case 'selectExpr': {
      const path = selectPath(expr);
      if (path && !bound.has(path[0]) && path[0] in VARIABLE_SHAPES) return checkPath(path);
      return checkExpr(kind.value.operand, bound);
    }
    case 'callExpr': {
      const name = kind.value.function;
      // Operators (_+_, @in, _[_], ...) are the parser's own; a named function must exist.
      if (/^[A-Za-z]/.test(name) && !env.funcs.find(name)) return `unknown function "${name}"`;
      return checkExpr(kind.value.target, bound) ?? firstProblem(kind.value.args, bound);
    }
    case 'listExpr':
      return firstProblem(kind.value.elements, bound);
    case 'structExpr':
      for (const entry of kind.value.entries) {
        const p =
          (entry.keyKind.case === 'mapKey' ? checkExpr(entry.keyKind.value, bound) : undefined) ??
          checkExpr(entry.value, bound);
        if (p) return p;
      }
      return undefined;
    case 'comprehensionExpr': {
      const c = kind.value;
      const inner = new Set(bound);
      for (const v of [c.iterVar, c.iterVar2, c.accuVar]) if (v) inner.add(v);
      return (
        checkExpr(c.iterRange, bound) ??
        checkExpr(c.accuInit, inner) ??
        checkExpr(c.loopCondition, inner) ??
        checkExpr(c.loopStep, inner) ??
        checkExpr(c.result, inner)
      );
    }
    default:
      return undefined;
  }
}

function firstProblem(exprs: readonly Expr[], bound: ReadonlySet<string>): string | undefined {
  for (const e of exprs) {
    const p = checkExpr(e, bound);
    if (p) return p;
  }
  return undefined;
}

/** `a.b.c` as ['a', 'b', 'c'] when the chain is made of plain field selections on an identifier. */
function selectPath(expr: Expr): string[] | undefined {
  const fields: string[] = [];
  let e: Expr | undefined = expr;
  while (e?.exprKind.case === 'selectExpr') {
    fields.unshift(e.exprKind.value.field);
    e = e.exprKind.value.operand;
  }
  if (e?.exprKind.case !== 'identExpr') return undefined;
  return [e.exprKind.value.name, ...fields];
}

function checkPath(path: string[]): string | undefined {
  let shape: Shape = VARIABLE_SHAPES[path[0] as keyof PolicyVariables];
  for (let i = 1; i < path.length; i++) {
    if (shape === 'map') return undefined;
    const here = path.slice(0, i).join('.');
    if (shape === 'string') return `${here} is a string: it has no field "${path[i]}"`;
    const next: Shape | undefined = shape[path[i]];
    if (next === undefined) return `${here} has no field "${path[i]}"; its fields are ${Object.keys(shape).join(', ')}`;
    shape = next;
  }
  return undefined;
}

function toPlain(v: CelValue): PlainValue {
  if (v === null || typeof v === 'string' || typeof v === 'boolean' || typeof v === 'bigint' || typeof v === 'number')
    return v;
  if (v instanceof Uint8Array) return v;
  if (isCelUint(v)) return v.value;
  if (isCelList(v)) return [...v].map(toPlain);
  if (isCelMap(v)) {
    const out: Record<string, PlainValue> = {};
    for (const [k, x] of v.entries()) out[String(isCelUint(k) ? k.value : k)] = toPlain(x);
    return out;
  }
  return String(v);
}

/** Shows a value as CEL would write it, for messages about examples and defaults. */
export function showValue(v: PlainValue | undefined): string {
  if (v === undefined) return 'nothing';
  if (typeof v === 'bigint') return String(v);
  if (v instanceof Uint8Array) return `bytes(${v.length})`;
  return JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? Number(x) : x));
}
