import { activation, compileExpression, showValue, type Program } from './cel.ts';
import { exampleVariables } from './inputs.ts';
import type {
  CompileResult,
  CompiledDefault,
  CompiledValidation,
  PolicyDocument,
  PolicyProblem,
  PolicySpec,
} from './model.ts';
import { parsePolicySpec } from './parse.ts';
import { evaluateDefault, evaluateValidation } from './rules.ts';

/**
 * Turns a policy object into a policy ready for admission, or into the problems that keep it
 * from being used: invalid fields, expressions that do not compile, examples that do not give
 * their expected outcome. Every example of every rule runs here, before the policy is used.
 */
export function compilePolicy(doc: PolicyDocument): CompileResult {
  const base = { name: doc.name, generation: doc.generation, source: doc.source };
  const parsed = parsePolicySpec(doc.spec);
  if ('problems' in parsed) return { ok: false, ...base, problems: parsed.problems, examples: 0 };
  const { spec } = parsed;
  const problems: PolicyProblem[] = [];
  const { validations, defaults } = compileRules(spec, problems);
  const examples = [...spec.validations, ...spec.defaults].reduce((n, r) => n + r.examples.length, 0);
  if (problems.length > 0) return { ok: false, ...base, problems, examples };
  problems.push(...validationExampleProblems(spec, validations), ...defaultExampleProblems(spec, defaults));
  if (problems.length > 0) return { ok: false, ...base, problems, examples };
  return {
    ok: true,
    ...base,
    examples,
    policy: { ...base, identityProviders: spec.identityProviders, validations, defaults, examples },
  };
}

/** Each rule's expressions compiled; each one that does not compile is a problem. */
function compileRules(spec: PolicySpec, problems: PolicyProblem[]) {
  const compile = (source: string, path: string): Program | undefined => {
    const p = compileExpression(source);
    if ('error' in p) {
      problems.push({ reason: 'CompileError', path, message: p.error });
      return undefined;
    }
    return p;
  };
  const validations: CompiledValidation[] = [];
  spec.validations.forEach((v, i) => {
    const path = `spec.validations[${i}]`;
    const program = compile(v.expression, `${path}.expression`);
    const messageProgram =
      v.messageExpression === undefined ? undefined : compile(v.messageExpression, `${path}.messageExpression`);
    if (program && (v.messageExpression === undefined || messageProgram)) {
      validations.push({ name: v.name, program, message: v.message, ...(messageProgram ? { messageProgram } : {}) });
    }
  });
  const defaults: CompiledDefault[] = [];
  spec.defaults.forEach((d, i) => {
    const program = compile(d.expression, `spec.defaults[${i}].expression`);
    if (program) defaults.push({ name: d.name, field: d.field, providers: new Set(d.providers), program });
  });
  return { validations, defaults };
}

/** The validations' examples that do not give their expected outcome. */
function validationExampleProblems(spec: PolicySpec, validations: CompiledValidation[]): PolicyProblem[] {
  return spec.validations.flatMap((v, i) =>
    v.examples.flatMap((ex, j) => {
      const outcome = evaluateValidation(validations[i], activation(exampleVariables(ex.input)));
      const failure = compareValidation(outcome, ex.expect);
      return failure
        ? [
            {
              reason: 'ExampleFailed' as const,
              path: `spec.validations[${i}].examples[${j}]`,
              message: `validation "${v.name}", example "${ex.name}": ${failure}`,
            },
          ]
        : [];
    }),
  );
}

/** The defaults' examples that do not give their expected value. */
function defaultExampleProblems(spec: PolicySpec, defaults: CompiledDefault[]): PolicyProblem[] {
  return spec.defaults.flatMap((d, i) =>
    d.examples.flatMap((ex, j) => {
      const outcome = evaluateDefault(defaults[i], activation(exampleVariables(ex.input)));
      const expected = ex.expect.value === '' ? null : ex.expect.value;
      let failure: string | undefined;
      if ('error' in outcome) failure = `expected ${showValue(expected)}, but the ${outcome.error}`;
      else if ((outcome.value ?? null) !== expected)
        failure = `expected ${showValue(expected)}, got ${showValue(outcome.value ?? null)}`;
      return failure
        ? [
            {
              reason: 'ExampleFailed' as const,
              path: `spec.defaults[${i}].examples[${j}]`,
              message: `default "${d.name}", example "${ex.name}": ${failure}`,
            },
          ]
        : [];
    }),
  );
}

function compareValidation(
  outcome: ReturnType<typeof evaluateValidation>,
  expect: { allowed: boolean; message?: string },
): string | undefined {
  const wanted = expect.allowed ? 'allowed' : 'denied';
  if ('error' in outcome) return `expected ${wanted}, but the ${outcome.error}`;
  if (outcome.allowed !== expect.allowed) {
    return outcome.allowed
      ? 'expected denied, but the expression gave true (allowed)'
      : `expected allowed, but the expression gave false (denied: ${outcome.message})`;
  }
  if (!outcome.allowed && expect.message !== undefined && outcome.message !== expect.message) {
    return `expected the message ${JSON.stringify(expect.message)}, got ${JSON.stringify(outcome.message)}`;
  }
  return undefined;
}
