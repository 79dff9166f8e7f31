// Text printed for a human to paste into a shell (`trust` commands, `doctor`'s fixes, `issuer
// publish`'s flags). Every value in it may come from an annotation or a manifest a tenant wrote,
// so: each word of a command is quoted here, a comment cannot end early, and the callers check a
// value's form before it goes into a command at all (a value of the wrong form gets a FAIL line).

/** Characters a word may hold unquoted: nothing the shell expands, splits or globs. */
const BARE = /^[A-Za-z0-9_@%+=:,./-]+$/;
/** Special inside double quotes (`!` too: interactive bash expands history there). */
const DOUBLE_QUOTE_SPECIAL = /[$`"\\!]/;

/**
 * One POSIX shell word: bare when safe; double-quoted when it holds a ' and nothing special in
 * double quotes (JMESPath queries stay readable); otherwise single-quoted, a ' becoming '\''.
 */
export function shellQuote(value: string): string {
  if (BARE.test(value)) return value;
  if (value.includes("'") && !DOUBLE_QUOTE_SPECIAL.test(value)) return `"${value}"`;
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** A command line of quoted words. */
export function shellCommand(words: readonly string[]): string {
  return words.map(shellQuote).join(' ');
}

/** A command's output as one word: "$(command)", its own words quoted inside. */
export function shellSubstitution(words: readonly string[]): string {
  return `"$(${shellCommand(words)})"`;
}

/**
 * Control characters (C0, DEL, C1), line and paragraph separators and bidirectional overrides,
 * as \u escapes: a newline would end a comment and run the rest, an escape sequence or a bidi
 * override would make a terminal show something other than what runs.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters it escapes
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** A comment line that stays one line whatever the text holds. */
export function shellComment(text: string): string {
  return `# ${printable(text)}`;
}

/** A value as indented JSON in comment lines: shown to the reader, never run. */
export function shellCommentJson(value: unknown): string[] {
  return JSON.stringify(value, null, 2)
    .split('\n')
    .map((line) => shellComment(line));
}

/** Groups in first-seen order, so output follows the input. */
export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

export function unique<T>(values: readonly T[]): T[] {
  return [...new Set(values)];
}
