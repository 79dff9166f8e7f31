import type { Config } from '../config.ts';
import { policySet, type PolicySet } from './evaluate.ts';
import type { CompileResult, CompiledPolicy } from './model.ts';

/**
 * What admissions do while a policy is broken. `deny` (the default) refuses every cloud identity
 * until the policy is fixed: a broken policy may have been meant to take access away, so going on
 * with older rules could keep a grant the operator just revoked. `keep-last-good` keeps enforcing
 * the last version that compiled and passed its examples (none, for a policy never good).
 */
type FailureMode = Config['policyFailureMode'];

/** How a policy stands at admission. */
type Enforcement =
  | { state: 'enforced'; generation: number }
  | { state: 'last-good'; generation: number }
  | { state: 'denying' }
  | { state: 'not-enforced' };

interface Entry {
  latest: CompileResult;
  lastGood?: CompiledPolicy;
}

/**
 * The compiled policies of every source (the cluster's objects, a file), and the snapshot
 * admissions read. A snapshot is rebuilt on each change, never mutated, so an admission in flight
 * keeps one consistent set.
 */
export class PolicyStore {
  readonly mode: FailureMode;
  readonly #entries = new Map<string, Entry>();
  #set: PolicySet = policySet([]);

  constructor(mode: FailureMode) {
    this.mode = mode;
  }

  current(): PolicySet {
    return this.#set;
  }

  /** Records a newly compiled version; returns how it is enforced now. */
  put(result: CompileResult): Enforcement {
    const key = keyOf(result.source, result.name);
    const entry = this.#entries.get(key);
    const next: Entry = { latest: result, lastGood: result.ok ? result.policy : entry?.lastGood };
    this.#entries.set(key, next);
    this.#rebuild();
    // biome-ignore lint/style/noNonNullAssertion: Put just above: there is an entry under this key.
    return this.enforcement(result.source, result.name)!;
  }

  delete(source: string, name: string): void {
    if (this.#entries.delete(keyOf(source, name))) this.#rebuild();
  }

  /** Names of the policies held for a source. */
  names(source: string): string[] {
    return [...this.#entries.values()].filter((e) => e.latest.source === source).map((e) => e.latest.name);
  }

  enforcement(source: string, name: string): Enforcement | undefined {
    const entry = this.#entries.get(keyOf(source, name));
    if (!entry) return undefined;
    if (entry.latest.ok) return { state: 'enforced', generation: entry.latest.generation };
    if (this.mode === 'deny') return { state: 'denying' };
    return entry.lastGood ? { state: 'last-good', generation: entry.lastGood.generation } : { state: 'not-enforced' };
  }

  #rebuild(): void {
    const policies: CompiledPolicy[] = [];
    const unavailable: { name: string; message: string }[] = [];
    for (const { latest, lastGood } of this.#entries.values()) {
      if (latest.ok) policies.push(latest.policy);
      else if (this.mode === 'deny') unavailable.push({ name: latest.name, message: summary(latest) });
      else if (lastGood) policies.push(lastGood);
    }
    this.#set = policySet(policies, unavailable);
  }
}

function keyOf(source: string, name: string): string {
  return `${source}\u0000${name}`;
}

/** The first problem and how many more: enough for a denial message and a log line. */
export function summary(result: Extract<CompileResult, { ok: false }>): string {
  const [first, ...rest] = result.problems;
  return `${first.path}: ${first.message}${rest.length ? ` (and ${rest.length} more problem${rest.length > 1 ? 's' : ''})` : ''}`;
}
