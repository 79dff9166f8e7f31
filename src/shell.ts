// The one quoting module: every value that reaches a shell, or the kubelet's $(NAME) expansion,
// goes through it. Two audiences:
// - text printed for a human to paste into a shell (`trust` commands, `doctor`'s fixes, `issuer
//   publish`'s flags). Every value in it may come from an annotation or a manifest a tenant wrote,
//   so: each word of a command is quoted here, a comment cannot end early, and the callers check a
//   value's form before it goes into a command at all (a value of the wrong form gets a FAIL line);
// - what the webhook writes into a Pod for the kubelet and a container's shell (pfnet's gcloud
//   setup script): a script names its values as "$NAME" and reads them from its environment, so
//   no value is ever part of its text, and every $ is escaped for the kubelet (kubeletLiteral).

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

/** An environment variable's name, as POSIX shells and the kubelet's $(NAME) read one. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * A variable of the script's environment as one shell word: "$NAME", double-quoted so the value
 * is neither split nor globbed. The value stays in the environment: whatever it holds, the shell
 * never reads it as syntax. Names are the caller's constants; a name that is not one is a bug.
 */
export function shellVariable(name: string): string {
  if (!ENV_NAME.test(name)) throw new TypeError(`shellVariable: "${name}" is not an environment variable name`);
  return `"$${name}"`;
}

/**
 * Text the kubelet passes on unchanged. It expands $(NAME) in a container's command, args and
 * env values, from the container's environment (an unknown name stays as written), and reads $$
 * as $ (k8s.io/kubernetes third_party/forked/golang/expansion): with every $ doubled, nothing is
 * expanded, and the container gets exactly this text.
 */
export function kubeletLiteral(text: string): string {
  return text.replaceAll('$', () => '$$');
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
