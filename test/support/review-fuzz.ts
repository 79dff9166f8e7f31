// Seeded mutations of valid AdmissionReviews, as an attacker who can reach /mutate would send them:
// the Pods and ServiceAccounts of examples/ as the starting point, then one to four edits anywhere in
// the review (a value replaced by one of another type or by a hostile string, a member removed or
// added, an item duplicated, a subtree copied elsewhere). The same seed gives the same review.
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
export function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)];
  const chance = (p: number) => next() < p;
  return { next, int, pick, chance };
}
export type Rng = ReturnType<typeof rng>;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Obj = { [key: string]: Json };

export interface Manifest {
  apiVersion?: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  [key: string]: unknown;
}

const EXAMPLES = resolve(import.meta.dirname, '../../examples');

/** The ServiceAccounts and Pods of examples/*.yaml (all in one namespace, `demo`). */
export function examples(): { serviceAccounts: Manifest[]; pods: Obj[] } {
  const serviceAccounts: Manifest[] = [];
  const pods: Obj[] = [];
  for (const file of readdirSync(EXAMPLES)
    .filter((f) => f.endsWith('.yaml'))
    .sort())
    for (const doc of parseAllDocuments(readFileSync(join(EXAMPLES, file), 'utf8'))) {
      const m = doc.toJS() as Manifest | null;
      if (m?.kind === 'ServiceAccount') serviceAccounts.push(m);
      if (m?.kind === 'Pod') pods.push(m as unknown as Obj);
    }
  return { serviceAccounts, pods };
}

/** A review as kube-apiserver sends one for a Pod CREATE. */
export function podReview(pod: unknown, uid: string, namespace: string): Obj {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      name: (pod as { metadata?: { name?: string } }).metadata?.name ?? '',
      namespace,
      operation: 'CREATE',
      userInfo: {
        username: 'system:serviceaccount:kube-system:replicaset-controller',
        groups: ['system:authenticated'],
      },
      object: pod as Json,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  };
}

// Keys the webhook and the API server give meaning to: an added member is most often one of them.
const KEYS = [
  'name',
  'value',
  'valueFrom',
  'env',
  'volumeMounts',
  'mountPath',
  'readOnly',
  'volumes',
  'containers',
  'initContainers',
  'ephemeralContainers',
  'annotations',
  'labels',
  'metadata',
  'spec',
  'serviceAccountName',
  'serviceAccount',
  'nodeSelector',
  'os',
  'hostNetwork',
  'projected',
  'sources',
  'serviceAccountToken',
  'emptyDir',
  'restartPolicy',
  'image',
  'generateName',
  'namespace',
  'kubernetes.io/os',
  'workload-identity-webhook.io/injected',
  'workload-identity-webhook.io/skip',
  'azure.workload.identity/use',
  'azure.workload.identity/inject-proxy-sidecar',
  'azure.workload.identity/proxy-sidecar-port',
  'azure.workload.identity/skip-containers',
  'azure.workload.identity/service-account-token-expiration',
  'eks.amazonaws.com/skip-containers',
  'eks.amazonaws.com/token-expiration',
  'eks.amazonaws.com/skip-pod-identity-webhook',
  'cloud.google.com/skip-containers',
  'cloud.google.com/token-expiration',
  'kubernetes.io/config.mirror',
  'constructor',
  'toString',
  'hasOwnProperty',
  '',
  'a/b~c',
];

const STRINGS = [
  '',
  'x',
  'true',
  'false',
  'windows',
  'app',
  'Always',
  '3600',
  '86401',
  '-1',
  '1e3',
  ' ',
  ';',
  ',',
  'app;app,app',
  '$(touch pwned)',
  '`id`',
  '\'"',
  'a\nb',
  '\u0000',
  'é∂\u202e',
  '../../etc',
  'C:\\x',
  '/var/run/secrets/eks.amazonaws.com/serviceaccount',
  '/var/run/secrets/azure/tokens',
  'aws-iam-token',
  'azure-identity-token',
  'gcp-iam-token',
  'constructor',
  '__proto__',
  '{"v":2}',
  'a'.repeat(254),
  'b'.repeat(4096),
];

function hostileValue(r: Rng): Json {
  switch (r.int(8)) {
    case 0:
      return r.pick([null, true, false]);
    case 1:
      return r.pick([0, -1, 1, 1.5, 65536, 1e21, -0.5, 2 ** 53]);
    case 2:
    case 3:
      return r.pick(STRINGS);
    case 4:
      return r.pick([[], [null], [1], ['x'], [[]], [{}]]);
    case 5:
      return r.pick<Json>([{}, { name: 1 }, { name: 'x' }, { a: 'b' }, { name: 'x', value: 1 }]);
    case 6:
      return [{ name: r.pick(STRINGS), ...(r.chance(0.5) ? { value: r.pick(STRINGS) } : {}) }];
    default:
      return r.chance(0.9) ? r.pick(STRINGS) : nested(1 + r.int(300));
  }
}

function nested(depth: number): Json {
  let v: Json = 'x';
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { a: v };
  return v;
}

interface Slot {
  parent: Obj | Json[];
  key: string | number;
}

/** Every value of the tree with where it sits (the root excepted). */
function slots(root: Json, out: Slot[] = []): Slot[] {
  if (Array.isArray(root))
    root.forEach((v, i) => {
      out.push({ parent: root, key: i });
      slots(v, out);
    });
  else if (root !== null && typeof root === 'object')
    for (const k of Object.keys(root)) {
      out.push({ parent: root, key: k });
      slots(root[k], out);
    }
  return out;
}

const get = (s: Slot): Json => (s.parent as Record<string | number, Json>)[s.key];

/** Sets a member as JSON.parse would: `__proto__` and the like become own members, never prototypes. */
function set(s: Slot, value: Json): void {
  Object.defineProperty(s.parent, s.key, { value, enumerable: true, writable: true, configurable: true });
}

function remove(s: Slot): void {
  if (Array.isArray(s.parent)) s.parent.splice(s.key as number, 1);
  else delete s.parent[s.key as string];
}

const clone = <T>(v: T): T => (v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T));

function retype(v: Json, r: Rng): Json {
  if (typeof v === 'string') return r.chance(0.5) && Number.isFinite(Number(v)) ? Number(v) : [v];
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return Object.fromEntries(v.map((x, i) => [String(i), x]));
  if (v !== null) return r.chance(0.5) ? Object.values(v) : JSON.stringify(v);
  return {};
}

/** A value of the same JSON type as `v`: what a typed client could send, only not what was meant. */
function sameType(v: Json, r: Rng): Json {
  if (typeof v === 'string') return r.pick(STRINGS);
  if (typeof v === 'number') return r.pick([0, -1, 1, 599, 600, 3600, 86400, 86401, 2 ** 31]);
  if (typeof v === 'boolean') return !v;
  if (Array.isArray(v)) {
    const copy = clone(v);
    if (copy.length && r.chance(0.5)) copy.splice(r.int(copy.length), 1);
    else if (copy.length) copy.splice(r.int(copy.length + 1), 0, clone(r.pick(copy)));
    return copy;
  }
  if (v === null) return null;
  const copy = clone(v);
  const keys = Object.keys(copy);
  if (keys.length && r.chance(0.4)) delete copy[r.pick(keys)];
  else set({ parent: copy, key: r.pick(KEYS) }, r.pick(STRINGS));
  return copy;
}

/** One edit somewhere in `review`, most often inside request.object. */
function mutateOnce(review: Obj, r: Rng): void {
  const request = review.request as Obj | undefined;
  const inObject = request?.object !== null && typeof request?.object === 'object' && r.chance(0.85);
  const all = slots(inObject ? (request!.object as Json) : review);
  if (all.length === 0) return;
  const slot = r.pick(all);
  const value = get(slot);
  switch (r.int(12)) {
    case 0:
    case 1:
      set(slot, hostileValue(r));
      return;
    case 2:
      set(slot, clone(get(r.pick(all))) ?? null);
      return;
    case 3:
      remove(slot);
      return;
    case 4:
      set(slot, retype(value, r));
      return;
    case 5:
    case 6:
    case 7:
    case 8:
      set(slot, sameType(value, r));
      return;
    case 9: {
      // Add a member to an object (or an item to a list) at or above the slot.
      const target: Json = value !== null && typeof value === 'object' ? value : (slot.parent as Json);
      if (Array.isArray(target)) target.push(r.chance(0.6) && target.length ? clone(r.pick(target)) : hostileValue(r));
      else set({ parent: target as Obj, key: r.pick(KEYS) }, r.chance(0.3) ? clone(get(r.pick(all))) : hostileValue(r));
      return;
    }
    default: {
      // Metadata the providers read: their annotations and labels, set to a hostile or valid value.
      const object = request?.object;
      const meta = object !== null && typeof object === 'object' && !Array.isArray(object) ? object.metadata : null;
      if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) {
        set(slot, hostileValue(r));
        return;
      }
      const which = r.chance(0.5) ? 'annotations' : 'labels';
      const map = meta[which];
      if (map === null || typeof map !== 'object' || Array.isArray(map)) set({ parent: meta, key: which }, {});
      set(
        { parent: meta[which] as Obj, key: r.pick(KEYS.filter((k) => k.includes('/'))) },
        r.chance(0.1)
          ? hostileValue(r)
          : r.pick(['true', 'app', 'restore', 'app;restore', 'app,x', '3600', '8080', '', ...STRINGS]),
      );
    }
  }
}

/** The review of `base` with one to four seeded edits; `base` is left as it was. */
export function mutateReview(base: Obj, r: Rng): Obj {
  const review = clone(base);
  const edits = 1 + r.int(4);
  for (let i = 0; i < edits; i++) mutateOnce(review, r);
  return review;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * What kube-apiserver's validation would refuse in the parts of a Pod the webhook writes (a subset
 * of ValidatePod), counted by kind: the fuzz asserts that a patch adds none to the object it was
 * made for. Kinds name no index, since a patch that removes an item moves the others.
 */
export function podViolations(pod: unknown): Map<string, number> {
  const found = new Map<string, number>();
  const add = (what: string) => found.set(what, (found.get(what) ?? 0) + 1);
  const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  const list = (v: unknown, what: string): unknown[] => {
    if (v !== undefined && !Array.isArray(v)) add(`${what} not a list`);
    return Array.isArray(v) ? v : [];
  };
  if (!isObj(pod)) return new Map([['not an object', 1]]);
  const meta = pod.metadata;
  if (meta !== undefined && !isObj(meta)) add('metadata');
  for (const map of ['annotations', 'labels'] as const) {
    const m = isObj(meta) ? meta[map] : undefined;
    if (m === undefined) continue;
    if (!isObj(m)) add(`metadata.${map}`);
    else for (const v of Object.values(m)) if (typeof v !== 'string') add(`metadata.${map} value`);
  }
  const spec = pod.spec;
  if (!isObj(spec)) {
    add('spec');
    return found;
  }
  const volumeNames = new Set<string>();
  for (const v of list(spec.volumes, 'spec.volumes')) {
    if (!isObj(v) || typeof v.name !== 'string' || !DNS_LABEL.test(v.name)) add('volume name');
    else if (volumeNames.has(v.name)) add(`volume ${v.name} twice`);
    else volumeNames.add(v.name);
    const sources = isObj(v) && isObj(v.projected) ? v.projected.sources : undefined;
    for (const s of Array.isArray(sources) ? sources : []) {
      const t = isObj(s) ? s.serviceAccountToken : undefined;
      if (!isObj(t)) continue;
      if (typeof t.path !== 'string' || t.path === '') add('token path');
      if (
        t.expirationSeconds !== undefined &&
        !(Number.isInteger(t.expirationSeconds) && Number(t.expirationSeconds) >= 600)
      )
        add('token expirationSeconds');
    }
  }
  const containerNames = new Set<string>();
  for (const field of ['initContainers', 'containers'] as const)
    for (const c of list(spec[field], `spec.${field}`)) {
      if (!isObj(c) || typeof c.name !== 'string' || !DNS_LABEL.test(c.name)) {
        add(`${field} name`);
        continue;
      }
      if (containerNames.has(c.name)) add(`container ${c.name} twice`);
      containerNames.add(c.name);
      for (const e of list(c.env, 'env'))
        if (
          !isObj(e) ||
          typeof e.name !== 'string' ||
          e.name === '' ||
          (e.value !== undefined && typeof e.value !== 'string')
        )
          add('env item');
      const paths = new Set<string>();
      for (const m of list(c.volumeMounts, 'volumeMounts')) {
        if (!isObj(m) || typeof m.name !== 'string' || typeof m.mountPath !== 'string') {
          add('volumeMount item');
          continue;
        }
        if (!volumeNames.has(m.name)) add(`mount of a missing volume ${m.name}`);
        if (paths.has(m.mountPath)) add(`${c.name} mounts ${m.mountPath} twice`);
        paths.add(m.mountPath);
      }
    }
  return found;
}

/** The kinds of violation `after` has more of than `before`. */
export function addedViolations(before: unknown, after: unknown): string[] {
  const b = podViolations(before);
  return [...podViolations(after)].filter(([k, n]) => n > (b.get(k) ?? 0)).map(([k]) => k);
}
