// Text a caller sent, made fit for a log line or a message: clipped to a bound, so a hostile
// value of any length or type costs a line no more than a Kubernetes name does.

/** Longest string a log field keeps: a Kubernetes name is at most 253 characters. */
const MAX_LOG_FIELD = 253;

/** The value, at most `max` characters (its length said when clipped); a non-string as its type. */
export function clip(value: unknown, max = MAX_LOG_FIELD): string | undefined {
  // Whatever a caller sent: a log line never fails on a field's type.
  if (typeof value !== 'string') return value === undefined ? undefined : typeof value;
  if (value.length <= max) return value;
  return `${value.slice(0, max)}…(${value.length} chars)`;
}
