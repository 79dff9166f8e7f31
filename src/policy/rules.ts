// Evaluating one rule for one input: the same function judges examples at load and objects at
// admission, so an example that passes means what it says.
import { showValue, type Activation } from './cel.ts';
import type { CompiledDefault, CompiledValidation } from './model.ts';

type ValidationOutcome = { allowed: true } | { allowed: false; message: string } | { error: string };

export function evaluateValidation(rule: CompiledValidation, vars: Activation): ValidationOutcome {
  const result = rule.program.run(vars);
  if ('error' in result) return { error: `expression failed: ${result.error}` };
  if (typeof result.value !== 'boolean')
    return { error: `expression gave ${showValue(result.value)}; a validation must give true or false` };
  if (result.value) return { allowed: true };
  return { allowed: false, message: denialMessage(rule, vars) };
}

function denialMessage(rule: CompiledValidation, vars: Activation): string {
  if (!rule.messageProgram) return rule.message;
  // As in ValidatingAdmissionPolicy: a messageExpression that fails or gives no text falls back to message.
  const m = rule.messageProgram.run(vars);
  if ('value' in m && typeof m.value === 'string' && m.value.trim() !== '') return m.value.trim();
  return rule.message;
}

/** undefined value: the default gives nothing here (null or an empty string). */
type DefaultOutcome = { value: string | number | undefined } | { error: string };

export function evaluateDefault(rule: CompiledDefault, vars: Activation): DefaultOutcome {
  const result = rule.program.run(vars);
  if ('error' in result) return { error: `expression failed: ${result.error}` };
  const v = result.value;
  if (v === null || v === '') return { value: undefined };
  if (rule.field === 'tokenExpirationSeconds') {
    if (typeof v === 'bigint') return { value: Number(v) };
    if (typeof v === 'string' && /^\d{1,12}$/.test(v)) return { value: Number(v) };
    return { error: `expression gave ${showValue(v)}; ${rule.field} must be a whole number of seconds (or null)` };
  }
  if (typeof v !== 'string')
    return { error: `expression gave ${showValue(v)}; ${rule.field} must be a string (or null)` };
  return { value: v };
}
