import { MAX_LIST_ENTRIES, MAX_LIST_ENTRY } from '../bounds.ts';
import { denial, type Denial } from '../errors.ts';
import { clip } from '../text.ts';
import { isDnsLabel } from '../model.ts';
import type { Container, DownwardAPIFile, Pod, Volume } from '../kube/types.ts';
import type { TokenBounds } from './facts.ts';

/**
 * Parses a whole number of seconds from an annotation. Anything else (units, signs, blanks,
 * fractions) is refused with a message naming the annotation: a silent fallback to a default
 * is how users end up with tokens they did not ask for.
 */
export function parseSeconds(value: string, key: string, where: string): number | Denial {
  const text = value.trim();
  if (!/^\d{1,12}$/.test(text)) {
    return denial(
      'InvalidTokenExpiration',
      `${where} annotation ${key}="${value}" is not a whole number of seconds (for example "3600")`,
    );
  }
  return Number(text);
}

/**
 * Holds a token expiry to the cloud's bounds (CLOUDS): above the maximum is refused; below the
 * minimum is raised or refused, as the cloud's bounds say.
 */
export function boundExpiration(seconds: number, bounds: TokenBounds, key: string, where: string): number | Denial {
  if (bounds.belowMinimum === 'refuse') {
    if (seconds >= bounds.min && seconds <= bounds.max) return seconds;
    return denial(
      'InvalidTokenExpiration',
      `${where} annotation ${key}=${seconds} is out of range; expected ${bounds.min} to ${bounds.max} seconds`,
    );
  }
  if (seconds > bounds.max)
    return denial(
      'InvalidTokenExpiration',
      `annotation ${key}=${seconds} exceeds the maximum of ${bounds.max} seconds`,
    );
  return Math.max(seconds, bounds.min);
}

export function parseBool(value: string, key: string, where: string): boolean | Denial {
  // Go's strconv.ParseBool, which the single-cloud webhooks use: the same spellings keep working.
  switch (value.trim()) {
    case '1':
    case 't':
    case 'T':
    case 'true':
    case 'TRUE':
    case 'True':
      return true;
    case '0':
    case 'f':
    case 'F':
    case 'false':
    case 'FALSE':
    case 'False':
      return false;
    default:
      return denial('InvalidAnnotation', `${where} annotation ${key}="${value}" must be "true" or "false"`);
  }
}

/**
 * A value a peer accepted and read its own way: admitted with that reading and a warning naming
 * the problem and the expected form, or, with --strict, refused with the same message.
 */
export function tolerated<T>(
  strict: boolean,
  warnings: string[],
  problem: Denial,
  fallback: T,
  reading: string,
): T | Denial {
  if (strict) return problem;
  warnings.push(`${problem.message}; ${reading}, as the peer webhook does (--strict refuses it)`);
  return fallback;
}

/** Splits a container-name list; empty items (", ,") are ignored. */
function splitNames(value: string | undefined, separator: string): ReadonlySet<string> {
  if (!value) return EMPTY;
  const names = new Set<string>();
  for (const part of value.split(separator)) {
    const name = part.trim();
    if (name) names.add(name);
  }
  return names;
}
const EMPTY: ReadonlySet<string> = new Set();

/**
 * The containers a provider leaves alone: those its skip-containers annotation names and, when the
 * Pod carries an include-containers annotation naming anyone, every container and init container
 * it does not name. Skip wins for a name in both lists (the narrower reading, with a warning); an
 * included name that matches no container is warned of, never guessed at.
 */
export function skippedContainers(
  pod: Pod,
  keys: { skip: string; include: string },
  separator: string,
  warnings: string[],
): ReadonlySet<string> {
  const annotations = pod.metadata?.annotations;
  const skip = splitNames(annotations?.[keys.skip], separator);
  const include = splitNames(annotations?.[keys.include], separator);
  if (include.size === 0) return skip;
  const names = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].map((c) => c.name);
  const known = new Set(names);
  const unknown = [...include].filter((name) => !known.has(name));
  const both = [...include].filter((name) => known.has(name) && skip.has(name));
  // One warning per kind, the names quoted and clipped: 64 names would be 64 warnings otherwise.
  if (unknown.length)
    warnings.push(`Pod annotation ${keys.include} names no container or init container ${quoted(unknown)}`);
  if (both.length)
    warnings.push(`Pod annotation ${keys.skip} wins: ${quoted(both)} left alone, though ${keys.include} names them`);
  const skipped = new Set(skip);
  for (const name of names) if (!include.has(name)) skipped.add(name);
  return skipped;
}
const quoted = (names: string[]) => clip(names.map((n) => JSON.stringify(n)).join(', '), 200) ?? '';

/** `/var/run/x/token` as a Windows container sees it: `C:\var\run\x\token`. */
export function windowsPath(path: string): string {
  return 'C:' + path.replaceAll('/', '\\');
}

export function tokenVolume(
  name: string,
  audience: string,
  expirationSeconds: number,
  tokenPath: string,
  files: DownwardAPIFile[] = [],
): Volume {
  const sources: NonNullable<Volume['projected']>['sources'] = [
    { serviceAccountToken: { audience, expirationSeconds, path: tokenPath } },
  ];
  if (files.length > 0) sources.push({ downwardAPI: { items: files } });
  return { name, projected: { sources } };
}

/** The Pod's init containers and containers, in that order (names are unique across both). */
export function podContainers(pod: Pod): Container[] {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
}

/**
 * Whether the container's `envFrom` could set `name`: a ConfigMap or Secret source without a
 * prefix, or with a prefix `name` begins with, may hold that key. The webhook cannot read the
 * source at admission, and an `env` entry would override it (env wins over envFrom).
 */
export function envFromMaySet(container: Container, name: string): boolean {
  const sources: unknown = container.envFrom;
  if (!Array.isArray(sources)) return false;
  return sources.some((s: unknown) => {
    const prefix = (s as { prefix?: unknown } | null)?.prefix;
    return name.startsWith(typeof prefix === 'string' ? prefix : '');
  });
}

/**
 * Splits a list annotation: entries separated by commas, semicolons, spaces or new lines (none
 * of which a name, ARN, GUID or provider holds), empty entries ignored.
 */
function splitList(value: string): string[] {
  return value.split(/[\s,;]+/).filter(Boolean);
}

/** `key=value` entries of a list annotation; an entry without "=" or with an empty side is a problem. */
function parsePairs(entries: readonly string[]): { pairs: [string, string][]; bad: string[] } {
  const pairs: [string, string][] = [];
  const bad: string[] = [];
  for (const entry of entries) {
    const at = entry.indexOf('=');
    if (at <= 0 || at === entry.length - 1) bad.push(entry);
    else pairs.push([entry.slice(0, at), entry.slice(at + 1)]);
  }
  return { pairs, bad };
}

/** How a `<name>=<value>` list annotation is read, and its problems named. */
interface NamedEntries {
  /** The annotation, as messages name it. */
  key: string;
  /** One entry's form, e.g. `<profile>=<role>`. */
  entry: string;
  /** The list's form, said after a problem. */
  form: string;
  /** What an empty list names none of, e.g. `role`. */
  noun: string;
  /** The problem with a name, undefined when it is one. */
  nameProblem(name: string): string | undefined;
  /** The problem of a name given twice. */
  twice(name: string): string;
}

/** An entry as a message shows it: quoted, and clipped (an entry may be anything its author wrote). */
const shown = (entry: string) => JSON.stringify(clip(entry, 80));

/** The naming rules of a `<container>=<value>` list (Azure's container client ids, AWS's container profiles). */
export const CONTAINER_ENTRIES = {
  noun: 'container',
  nameProblem: (name: string) => (isDnsLabel(name) ? undefined : `"${name}" is not a container name (a DNS label)`),
  twice: (name: string) => `container "${name}" is named twice`,
} as const;

/**
 * The `<name>=<value>` entries of a list annotation, each name valid and given once; a malformed
 * entry, an empty list, a bad or repeated name is an InvalidAnnotation denial. Values are the caller's.
 * More than MAX_LIST_ENTRIES entries, or an entry longer than MAX_LIST_ENTRY, is refused before
 * any is read: the work and the messages stay as small as a legitimate list's.
 */
export function parseNamedEntries(value: string, rules: NamedEntries): [string, string][] | Denial {
  const { key, form } = rules;
  const listed = splitList(value);
  if (listed.length > MAX_LIST_ENTRIES)
    return denial('TooLarge', `${key} lists ${listed.length} entries, more than the ${MAX_LIST_ENTRIES} it may have`);
  const long = listed.find((entry) => entry.length > MAX_LIST_ENTRY);
  if (long !== undefined)
    return denial(
      'TooLarge',
      `${key}: the entry ${shown(long)} is ${long.length} characters long, more than the ${MAX_LIST_ENTRY} an entry may have`,
    );
  const { pairs, bad } = parsePairs(listed);
  if (bad.length > 0)
    return denial('InvalidAnnotation', `${key}: ${bad.map(shown).join(', ')} is not ${rules.entry}; ${form}`);
  if (pairs.length === 0) return denial('InvalidAnnotation', `${key}=${shown(value)} names no ${rules.noun}; ${form}`);
  const seen = new Set<string>();
  for (const [name] of pairs) {
    const problem = rules.nameProblem(name) ?? (seen.has(name) ? rules.twice(name) : undefined);
    if (problem) return denial('InvalidAnnotation', `${key}: ${problem}`);
    seen.add(name);
  }
  return pairs;
}
