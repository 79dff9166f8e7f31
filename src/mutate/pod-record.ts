// The record an admission writes (injection-record.ts holds its format and signature): the
// entries of an earlier record of the same ServiceAccount carried over, and what this admission
// adds, so a later admission under another ServiceAccount can remove exactly that.
import type { Pod } from '../kube/types.ts';
import { EntrySet, injectedDigest, type InjectionRecord } from './injection-record.ts';
import type { Additions } from './pod-additions.ts';
import { setupKey, volumeKey } from './pod-keys.ts';

/** The record being written: the earlier one's entries, to which this admission adds. */
export interface RecordDraft {
  /** The earlier record's env entries, as they were (the containers' plan reads them). */
  prior: EntrySet;
  env: EntrySet;
  vol: EntrySet;
  ann: EntrySet;
  keep: EntrySet;
  init: EntrySet;
  ctr: EntrySet;
  lab: EntrySet;
}

/** The record's entries, carried over from an earlier admission of the same ServiceAccount. */
export function draftRecord(record: InjectionRecord | undefined): RecordDraft {
  return {
    prior: new EntrySet(record?.env),
    env: new EntrySet(record?.env),
    vol: new EntrySet(record?.vol),
    ann: new EntrySet(record?.ann),
    keep: new EntrySet(record?.keep),
    init: new EntrySet(record?.init),
    ctr: new EntrySet(record?.ctr),
    lab: new EntrySet(record?.lab),
  };
}

/** The record's entries with this admission's additions: what a later admission may remove. */
export function recorded(
  next: RecordDraft,
  pod: Pod,
  { volumes, setups, added, annotations, labels }: Additions,
): Omit<InjectionRecord, 'v' | 'sa'> {
  for (const v of volumes) next.vol.add(v.name, injectedDigest(volumeKey(v)));
  for (const c of setups) next.init.add(c.name, injectedDigest(setupKey(c)));
  for (const c of [...added.initContainers.first, ...added.initContainers.last])
    next.init.add(c.name, injectedDigest(setupKey(c)));
  for (const c of [...added.containers.first, ...added.containers.last])
    next.ctr.add(c.name, injectedDigest(setupKey(c)));
  for (const [key, value] of Object.entries(annotations)) next.ann.add(key, injectedDigest(value));
  for (const [key, value] of Object.entries(labels))
    if (pod.metadata?.labels?.[key] !== value) next.lab.add(key, injectedDigest(value));
  return {
    env: next.env.entries,
    vol: next.vol.entries,
    ann: next.ann.entries,
    keep: next.keep.entries,
    ...(next.init.entries.length ? { init: next.init.entries } : {}),
    ...(next.ctr.entries.length ? { ctr: next.ctr.entries } : {}),
    ...(next.lab.entries.length ? { lab: next.lab.entries } : {}),
  };
}
