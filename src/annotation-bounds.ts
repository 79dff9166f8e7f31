// The annotations the ServiceAccount cache keeps between reviews: what a ServiceAccount's author
// (a tenant with `edit`) writes reaches every replica. Each reader lists the exact keys it reads,
// each with a bound from what a legitimate value needs (sizes from src/bounds.ts); a value over
// its bound is kept as a marker (no value), so what depends on it is refused with a message naming
// the key and the bound, and the process never pays. docs/hardening.md lists the bounds.
import { MAX_LIST_ENTRIES, MAX_SCALAR_ANNOTATION } from './bounds.ts';
import type { OversizeAnnotation } from './kube/types.ts';

/** One annotation key a reader reads, and the most a legitimate value of it needs. */
export interface AnnotationBound {
  readonly key: string;
  /** UTF-8 bytes of the value. */
  readonly maxBytes: number;
  /** A list annotation: at most this many entries (separated by commas, semicolons, blanks). */
  readonly maxEntries?: number;
}

/** A single-valued annotation. */
export function scalarBound(key: string, maxBytes = MAX_SCALAR_ANNOTATION): AnnotationBound {
  return { key, maxBytes };
}

/** A list annotation of MAX_LIST_ENTRIES entries of at most `entryBytes` each, with a separator and a blank. */
export function listBound(key: string, entryBytes: number): AnnotationBound {
  return { key, maxBytes: MAX_LIST_ENTRIES * (entryBytes + 2), maxEntries: MAX_LIST_ENTRIES };
}

const SEPARATORS = new Set([' ', '\t', '\n', '\r', ',', ';']);

/** Entries of a list value, as clouds/common.ts splitList splits it; counted without allocating. */
function entriesOf(value: string): number {
  let count = 0;
  let inEntry = false;
  for (let i = 0; i < value.length; i++) {
    const separator = SEPARATORS.has(value[i]);
    if (!separator && !inEntry) count++;
    inEntry = !separator;
  }
  return count;
}

/** How `value` exceeds `bound`; undefined when it does not. Linear in the value, once. */
export function overBound(value: string, bound: AnnotationBound): OversizeAnnotation | undefined {
  // A UTF-16 unit is 1 to 3 bytes of UTF-8: short values need no count.
  if (value.length * 3 <= bound.maxBytes && bound.maxEntries === undefined) return undefined;
  const bytes = Buffer.byteLength(value, 'utf8');
  const { key, maxBytes, maxEntries } = bound;
  if (bytes > maxBytes) return { key, bytes, maxBytes };
  if (maxEntries === undefined) return undefined;
  const entries = entriesOf(value);
  return entries > maxEntries ? { key, bytes, maxBytes, entries, maxEntries } : undefined;
}

/** The annotations of `given` that `bounds` name, or the first one over its bound. */
export function keepBounded(
  given: Readonly<Record<string, unknown>> | null | undefined,
  bounds: readonly AnnotationBound[],
): { kept: Record<string, string> | undefined } | { oversize: OversizeAnnotation } {
  let kept: Record<string, string> | undefined;
  if (!given) return { kept };
  for (const bound of bounds) {
    if (!Object.hasOwn(given, bound.key)) continue;
    const value = given[bound.key];
    if (typeof value !== 'string') continue;
    const oversize = overBound(value, bound);
    if (oversize) return { oversize };
    kept ??= {};
    kept[bound.key] = value;
  }
  return { kept };
}

/** Why an object over a bound is refused: `where` is "ServiceAccount ns/name". */
export function describeOversize(where: string, o: OversizeAnnotation): string {
  const over =
    o.entries !== undefined
      ? `holds ${o.entries} entries, more than the ${o.maxEntries} the webhook reads`
      : `holds ${o.bytes} bytes, more than the ${o.maxBytes} the webhook reads`;
  return `${where} annotation ${o.key} ${over} (docs/hardening.md lists the bounds); shorten it`;
}
