// The injection record: what the webhook added to a Pod, kept in one Pod annotation. When a later
// webhook changes serviceAccountName and the API server reinvokes this one, the record lets it
// remove exactly its own additions, so the old identity does not linger (the Azure peer's #1475).
//
// The Pod's author writes that annotation too, so nothing in it is trusted as written: the record
// is signed with a key only the webhook holds (HMAC-SHA256, bound to the namespace), and lists a
// digest of each value it added. A forged record fails the signature; a genuine one copied from
// another Pod removes only items equal to what the webhook itself injected. Its size does not grow
// with the number of containers: values are recorded once, not per container.
import { MAX_ANNOTATIONS_BYTES } from '../bounds.ts';
import { ByteMemo } from './byte-memo.ts';
import { createHmac, createSecretKey, hash, hkdfSync, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';

export const INJECTED_ANNOTATION = 'workload-identity-webhook.io/injected';

/** [name, digest of the value] */
export type Entry = [string, string];

export interface InjectionRecord {
  v: 2;
  /** ServiceAccount the injection was made for. */
  sa: string;
  /** Env vars added (the same value in every container that got it). */
  env: Entry[];
  /** Volumes added, with a digest of their projection. */
  vol: Entry[];
  /** Pod annotations added. */
  ann: Entry[];
  /**
   * [container key, env name] where the user had set the very value the webhook would add: those
   * are the user's and survive a removal. Container keys are `init/NAME` for init containers.
   */
  keep: Entry[];
  /** Setup init containers added (pfnet's gcloud mode), with a digest of what they run. */
  init?: Entry[];
  /** Containers added (the Azure proxy sidecar without native sidecars), likewise. */
  ctr?: Entry[];
  /** Pod labels added (EKS Pod Identity's). */
  lab?: Entry[];
}

/** Short, collision-resistant digest of a value: the record never holds a value itself. Not remembered: the value may be anyone's. */
export function digest(value: string): string {
  return hash('sha256', value, 'base64url').slice(0, 16);
}

/**
 * The digest of a value the webhook itself adds (a role ARN, a token path, a volume it projects):
 * the same few come back on every admission, so they are remembered, within a byte budget. Never
 * for a value the Pod carries: its author could make the process keep it.
 */
export function injectedDigest(value: string): string {
  let d = DIGESTS.get(value);
  if (d === undefined) {
    d = digest(value);
    DIGESTS.set(value, d);
  }
  return d;
}
const DIGESTS = new ByteMemo();

/**
 * Keys that sign records. The first signs; all verify (the previous key stays valid across a
 * rotation of the material it is derived from).
 */
export class RecordKeys {
  // KeyObjects: an HMAC from a raw Buffer key costs ~75 µs, from a KeyObject ~7 µs.
  readonly #keys: KeyObject[];

  constructor(keys: Buffer[]) {
    if (keys.length === 0) throw new Error('RecordKeys needs at least one key');
    this.#keys = keys.map((k) => createSecretKey(k));
  }

  /** A key derived from secret material (the serving key, a key file): replicas sharing it agree. */
  static derive(...materials: (string | Buffer)[]): RecordKeys {
    return new RecordKeys(
      materials.map((m) => Buffer.from(hkdfSync('sha256', m, 'workload-identity-webhook', 'injection-record', 32))),
    );
  }

  /** A key of this process only: right for one replica, tests and `preview`. */
  static random(): RecordKeys {
    return new RecordKeys([randomBytes(32)]);
  }

  sign(namespace: string, record: InjectionRecord): string {
    const body = bodyOf(namespace, record);
    let memo = this.#macs.get(this.#keys[0]);
    if (!memo) {
      memo = new ByteMemo();
      this.#macs.set(this.#keys[0], memo);
    }
    let mac = memo.get(body);
    if (mac === undefined) {
      mac = hmac(this.#keys[0], body);
      memo.set(body, mac);
    }
    return mac;
  }

  verify(namespace: string, record: InjectionRecord, mac: string): boolean {
    const given = Buffer.from(mac);
    const body = bodyOf(namespace, record);
    return this.#keys.some((key) => {
      // Looked up, never kept: a record read from a Pod is the author's until its MAC matches.
      const expected = Buffer.from(this.#macs.get(key)?.get(body) ?? hmac(key, body));
      return expected.length === given.length && timingSafeEqual(expected, given);
    });
  }

  // Records repeat (every Pod of a Deployment gets the same): the MACs of those this process
  // signed are remembered per key, within a byte budget.
  readonly #macs = new Map<KeyObject, ByteMemo>();
}

/**
 * What a MAC covers. The fields a record has always had are positional (`init` too, as [] when
 * absent: it came with version 2). Fields added since are appended only when they hold something,
 * each as a [tag, value] pair, so the records written before they existed keep their MAC.
 */
function bodyOf(namespace: string, r: InjectionRecord): string {
  return JSON.stringify([
    r.v,
    namespace,
    r.sa,
    r.env,
    r.vol,
    r.ann,
    r.keep,
    r.init ?? [],
    ...tagged('ctr', r.ctr),
    ...tagged('lab', r.lab),
  ]);
}

/** [[tag, value]] when the value holds something (an object, or a non-empty list), else []. */
function tagged(tag: string, value: object | undefined): [string, object][] {
  const empty = value === undefined || (Array.isArray(value) && value.length === 0);
  return empty ? [] : [[tag, value]];
}

function hmac(key: KeyObject, body: string): string {
  return createHmac('sha256', key).update(body).digest('base64url').slice(0, 22);
}

/** The annotation's value: the record and its signature. */
export function writeRecord(keys: RecordKeys, namespace: string, record: InjectionRecord): string {
  return JSON.stringify({ ...record, mac: keys.sign(namespace, record) });
}

/** The record, if the annotation holds one this webhook signed for this namespace. */
export function readRecord(keys: RecordKeys, namespace: string, raw: string | undefined): InjectionRecord | undefined {
  // No genuine record is larger than a Pod's annotations may be (admission refused larger ones).
  if (!raw || raw.length > MAX_ANNOTATIONS_BYTES) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return undefined;
  }
  const r = parsed as Partial<InjectionRecord> & { mac?: unknown };
  if (typeof r !== 'object' || r === null || r.v !== 2 || typeof r.sa !== 'string' || typeof r.mac !== 'string')
    return undefined;
  const { env, vol, ann, keep } = r;
  if (!isEntries(env) || !isEntries(vol) || !isEntries(ann) || !isEntries(keep)) return undefined;
  if (![r.init ?? [], r.ctr ?? [], r.lab ?? []].every(isEntries)) return undefined;
  const record: InjectionRecord = { v: 2, sa: r.sa, env, vol, ann, keep };
  if (r.init?.length) record.init = r.init;
  if (r.ctr) record.ctr = r.ctr;
  if (r.lab?.length) record.lab = r.lab;
  return keys.verify(namespace, record, r.mac) ? record : undefined;
}

function isEntries(value: unknown): value is Entry[] {
  return (
    Array.isArray(value) &&
    value.every((e) => Array.isArray(e) && e.length === 2 && typeof e[0] === 'string' && typeof e[1] === 'string')
  );
}

/** Set semantics over entries, without object-as-map pitfalls (a container may be named `constructor`). */
export class EntrySet {
  readonly #set = new Set<string>();
  readonly entries: Entry[] = [];

  constructor(entries: readonly Entry[] = []) {
    for (const e of entries) this.add(e[0], e[1]);
  }

  // Built on the first match: most sets are only added to.
  #names: Set<string> | undefined;

  add(name: string, value: string): void {
    const key = `${name}\u0000${value}`;
    if (this.#set.has(key)) return;
    this.#set.add(key);
    this.#names?.add(name);
    this.entries.push([name, value]);
  }

  /**
   * Whether an entry has this name and the digest of this value (a value the Pod carries, not
   * remembered): the name is asked first, so a value is read and digested only when it may match.
   */
  matches(name: string, value: () => string): boolean {
    this.#names ??= new Set(this.entries.map((e) => e[0]));
    return this.#names.has(name) && this.has(name, digest(value()));
  }

  has(name: string, value: string): boolean {
    return this.#set.has(`${name}\u0000${value}`);
  }
}
