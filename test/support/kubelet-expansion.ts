// The kubelet's $(NAME) expansion, ported from k8s.io/kubernetes
// third_party/forked/golang/expansion/expand.go (Expand, tryReadVariableName, MappingFuncFor) and
// how pkg/kubelet uses it: a container's env values in order, each expanded from the variables
// defined before it (then the Service variables), and command and args from the whole
// environment. What runs in a container is what these give.
import type { Container } from '../../src/kube/types.ts';

type Mapping = (name: string) => string;

/** MappingFuncFor: the first context that has the name; an unknown name stays `$(NAME)`. */
export function mappingFor(...contexts: ReadonlyMap<string, string>[]): Mapping {
  return (name) => {
    for (const vars of contexts) {
      const value = vars.get(name);
      if (value !== undefined) return value;
    }
    return `$(${name})`;
  };
}

/** tryReadVariableName on the text after a `$`: what it read, whether a name, code units consumed. */
function readName(input: string): [read: string, isVar: boolean, advance: number] {
  const rune = String.fromCodePoint(input.codePointAt(0)!);
  if (rune === '$') return ['$', false, 1]; // escaped operator
  if (rune === '(') {
    const close = input.indexOf(')', 1);
    if (close >= 0) return [input.slice(1, close), true, close + 1];
    return ['$(', false, 1]; // incomplete reference
  }
  return [`$${rune}`, false, rune.length];
}

/** Expand: `$$` is `$`, `$(NAME)` the mapping's value, anything else as written. */
export function expand(input: string, mapping: Mapping): string {
  let out = '';
  let checkpoint = 0;
  for (let cursor = 0; cursor < input.length; cursor++) {
    if (input[cursor] !== '$' || cursor + 1 >= input.length) continue;
    out += input.slice(checkpoint, cursor);
    const [read, isVar, advance] = readName(input.slice(cursor + 1));
    out += isVar ? mapping(read) : read;
    cursor += advance;
    checkpoint = cursor + 1;
  }
  return out + input.slice(checkpoint);
}

/** The container's environment as the kubelet builds it (env entries with a value; no envFrom here). */
export function containerEnv(c: Container, serviceEnv: ReadonlyMap<string, string> = new Map()): Map<string, string> {
  const env = new Map<string, string>();
  const mapping = mappingFor(env, serviceEnv);
  for (const e of c.env ?? []) {
    if (e.valueFrom !== undefined) throw new Error(`env ${e.name}: valueFrom is not expanded here`);
    env.set(e.name, e.value ? expand(e.value, mapping) : '');
  }
  for (const [k, v] of serviceEnv) if (!env.has(k)) env.set(k, v);
  return env;
}

/** ExpandContainerCommandAndArgs: the argv the runtime starts. */
export function containerArgv(c: Container, env: ReadonlyMap<string, string>): string[] {
  const mapping = mappingFor(env);
  const words = [...((c.command as string[] | undefined) ?? []), ...((c.args as string[] | undefined) ?? [])];
  return words.map((word) => expand(word, mapping));
}
