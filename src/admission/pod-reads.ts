// The values providers read from a Pod, held to the sizes they declare (PodProvider.podReads,
// src/bounds.ts) before any of them runs: an annotation longer than a legitimate value needs, a
// list annotation of more entries than MAX_LIST_ENTRIES, a container's own credential variable
// longer than any role, client id or path. The Pod is refused with the field and the bound named.
import { MAX_CREDENTIAL_ENV_VALUE, MAX_LIST_ENTRIES } from '../bounds.ts';
import type { PodProvider, PodReads } from '../clouds/types.ts';
import type { Container, Pod } from '../kube/types.ts';

interface Compiled {
  annotations: PodReads['annotations'];
  credentialEnv: ReadonlySet<string>;
}

// Providers are built once at start-up: their reads joined once too.
const compiled = new WeakMap<readonly PodProvider[], Compiled>();

function compile(providers: readonly PodProvider[]): Compiled {
  let found = compiled.get(providers);
  if (!found) {
    found = {
      annotations: providers.flatMap((p) => p.podReads.annotations),
      credentialEnv: new Set(providers.flatMap((p) => [...p.podReads.credentialEnv])),
    };
    compiled.set(providers, found);
  }
  return found;
}

/** Entries as the providers split them (common.ts splitNames): blanks between separators are none. */
const entries = (value: string, separator: string) => value.split(separator).filter((p) => p.trim() !== '').length;

function annotationProblem(annotations: Readonly<Record<string, string>>, reads: Compiled): string | undefined {
  for (const { key, max, separator } of reads.annotations) {
    if (!Object.hasOwn(annotations, key)) continue;
    const value = annotations[key];
    const where = `metadata.annotations[${JSON.stringify(key)}]`;
    if (value.length > max) return `${where} is ${value.length} characters long, more than the ${max} it may have`;
    if (separator === undefined) continue;
    // Split only once the length is bounded: at most MAX_NAME_LIST_ANNOTATION characters.
    const count = entries(value, separator);
    if (count > MAX_LIST_ENTRIES)
      return `${where} lists ${count} entries, more than the ${MAX_LIST_ENTRIES} a list annotation may have`;
  }
  return undefined;
}

function envProblem(list: string, containers: Container[] | undefined, reads: Compiled): string | undefined {
  if (!containers) return undefined;
  for (let i = 0; i < containers.length; i++) {
    const env = containers[i].env ?? [];
    for (let j = 0; j < env.length; j++) {
      const { name, value } = env[j];
      if (value === undefined || value.length <= MAX_CREDENTIAL_ENV_VALUE || !reads.credentialEnv.has(name)) continue;
      return `spec.${list}[${i}].env[${j}] (${name}) is ${value.length} characters long, more than the ${MAX_CREDENTIAL_ENV_VALUE} a credential variable the webhook compares may have`;
    }
  }
  return undefined;
}

/** The first value a provider reads that is over its bound, named; undefined when all are within. */
export function podReadsProblem(pod: Pod, providers: readonly PodProvider[]): string | undefined {
  const reads = compile(providers);
  const annotations = pod.metadata?.annotations;
  return (
    (annotations && annotationProblem(annotations, reads)) ??
    envProblem('initContainers', pod.spec?.initContainers, reads) ??
    envProblem('containers', pod.spec?.containers, reads)
  );
}
