import { escapePointerToken } from './json-pointer.ts';

/**
 * The only operations the webhook emits: `add` to an array end or a new member; `replace` of a
 * single map member the webhook owns; `remove` of an item the webhook itself injected earlier
 * (see INJECTED_ANNOTATION). Never a whole array or container.
 */
export type PatchOperation =
  | { op: 'add'; path: string; value: unknown }
  | { op: 'replace'; path: string; value: unknown }
  | { op: 'remove'; path: string };

/** Appends items to an array at `path`, creating the array when the object has none. */
export function appendAll(
  ops: PatchOperation[],
  path: string,
  existing: unknown[] | undefined,
  items: unknown[],
): void {
  if (items.length === 0) return;
  if (existing === undefined) {
    ops.push({ op: 'add', path, value: items });
    return;
  }
  for (const item of items) ops.push({ op: 'add', path: `${path}/-`, value: item });
}

/** Sets members of a string map at `path`, creating the map when the object has none. */
export function setMembers(
  ops: PatchOperation[],
  path: string,
  existing: Record<string, string> | undefined,
  members: Record<string, string>,
): void {
  const keys = Object.keys(members);
  if (keys.length === 0) return;
  if (existing === undefined) {
    ops.push({ op: 'add', path, value: { ...members } });
    return;
  }
  for (const key of keys) {
    // Own members only: `constructor` or `toString` is inherited, and a replace of it would not apply.
    const present = Object.hasOwn(existing, key);
    if (present && existing[key] === members[key]) continue;
    ops.push({
      op: present ? 'replace' : 'add',
      path: `${path}/${escapePointerToken(key)}`,
      value: members[key],
    });
  }
}
