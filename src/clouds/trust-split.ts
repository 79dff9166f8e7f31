// The split `trust` prints for an identity over a cloud's limit: its members in parts that each
// fit, in order, a group's members (a namespace's ServiceAccounts) kept in one part when the
// group fits one on its own, so one namespace's ServiceAccounts move to a new identity together.

/**
 * Parts of `members`, in order, each passing `fits`. A member that fits no part on its own gets
 * a part of its own (the caller reports that it cannot fit).
 */
export function splitToFit<T>(
  members: readonly T[],
  groupOf: (member: T) => string,
  fits: (part: readonly T[]) => boolean,
): T[][] {
  const groups = new Map<string, T[]>();
  for (const m of members) {
    const g = groups.get(groupOf(m));
    if (g) g.push(m);
    else groups.set(groupOf(m), [m]);
  }
  const parts: T[][] = [];
  let current: T[] = [];
  const flush = () => {
    if (current.length > 0) parts.push(current);
    current = [];
  };
  for (const group of groups.values()) {
    if (fits([...current, ...group])) {
      current.push(...group);
      continue;
    }
    flush();
    if (fits(group)) {
      current = [...group];
      continue;
    }
    // The group alone is over: member by member.
    for (const m of group) {
      if (current.length > 0 && !fits([...current, m])) flush();
      current.push(m);
    }
  }
  flush();
  return parts;
}

/** Names of the parts: the first keeps `name`, the others `<name>-2`, `-3`..., cut to `max` characters. */
export function partNames(name: string, count: number, max: number): string[] {
  return Array.from({ length: count }, (_, i) => {
    if (i === 0) return name;
    const suffix = `-${i + 1}`;
    return name.slice(0, max - suffix.length) + suffix;
  });
}
