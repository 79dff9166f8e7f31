// EKS Pod Identity associations: the file the AWS peer watches (--watch-container-credentials-config)
// naming the ServiceAccounts that get container credentials instead of IRSA. Its format is the
// peer's: {"identities": [{"namespace": "...", "serviceAccount": "..."}]}; an empty file means none.
// An entry may name the IAM role of its EKS association ("roleArn", which the peer ignores), so
// `trust` can print the association and `doctor` compare it with the ServiceAccount's annotation.
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { Logger } from 'pino';
import { ConfigError, errorMessage, ioProblem } from '../../errors.ts';
import { isObject } from '../../model.ts';
import { ROLE_ARN_PATTERN } from './role-arn.ts';

/** The ServiceAccount annotation (under the AWS prefix) naming the role of its EKS Pod Identity association. */
export const POD_IDENTITY_ROLE_ARN_KEY = 'pod-identity-role-arn';

interface Association {
  namespace: string;
  serviceAccount: string;
  /** The role the association names, when the file says. */
  roleArn?: string;
}

interface ParsedAssociations {
  keys: Map<string, Association>;
  /** Members the peer's Go struct ignores too; logged so nobody thinks they took effect. */
  ignored: string[];
}

const key = (namespace: string, serviceAccount: string) => `${namespace}/${serviceAccount}`;

/** Parses the file's text; throws a ConfigError naming the entry and the expected form. */
export function parseAssociations(text: string): ParsedAssociations {
  const keys = new Map<string, Association>();
  const ignored: string[] = [];
  if (text.trim() === '') return { keys, ignored };
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`not JSON (${errorMessage(err)})`);
  }
  const form =
    'expected {"identities": [{"namespace": "<namespace>", "serviceAccount": "<name>", "roleArn": "<optional IAM role ARN>"}, ...]}';
  if (!isObject(doc)) throw new ConfigError(`not an object; ${form}`);
  for (const k of Object.keys(doc)) if (k !== 'identities') ignored.push(k);
  const identities = (doc as { identities?: unknown }).identities;
  if (identities === undefined || identities === null) return { keys, ignored };
  if (!Array.isArray(identities)) throw new ConfigError(`"identities" is not a list; ${form}`);
  identities.forEach((item: unknown, i) => {
    const entry = item as Record<string, unknown> | null;
    if (!isObject(entry)) throw new ConfigError(`identities[${i}] is not an object; ${form}`);
    for (const field of ['namespace', 'serviceAccount'])
      if (typeof entry[field] !== 'string' || entry[field] === '')
        throw new ConfigError(`identities[${i}].${field} is missing or not a non-empty string; ${form}`);
    const roleArn = entry.roleArn;
    // Checked where it enters: a role ARN goes into the commands `trust` prints.
    if (roleArn !== undefined && (typeof roleArn !== 'string' || !ROLE_ARN_PATTERN.test(roleArn)))
      throw new ConfigError(
        `identities[${i}].roleArn ${JSON.stringify(roleArn)} is not an IAM role ARN (arn:<partition>:iam::<12 digits>:role/<name>); ${form}`,
      );
    for (const k of Object.keys(entry))
      if (k !== 'namespace' && k !== 'serviceAccount' && k !== 'roleArn') ignored.push(`identities[${i}].${k}`);
    const association = { namespace: entry.namespace as string, serviceAccount: entry.serviceAccount as string };
    keys.set(key(association.namespace, association.serviceAccount), {
      ...association,
      ...(roleArn !== undefined && { roleArn }),
    });
  });
  return { keys, ignored };
}

/** The associations in force; replaced whole when the file changes. */
export class PodIdentityAssociations {
  readonly file: string | undefined;
  #keys: Map<string, Association>;
  readonly ignored: string[];

  constructor(file: string | undefined, parsed: ParsedAssociations = { keys: new Map(), ignored: [] }) {
    this.file = file;
    this.#keys = parsed.keys;
    this.ignored = parsed.ignored;
  }

  /** Reads the file at start-up; throws a ConfigError naming the file and the problem. */
  static read(file: string): PodIdentityAssociations {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read ${file}: ${ioProblem(err)}`);
    }
    try {
      return new PodIdentityAssociations(file, parseAssociations(text));
    } catch (err) {
      throw new ConfigError(`${file}: ${errorMessage(err)}`);
    }
  }

  has(namespace: string, serviceAccount: string): boolean {
    return this.#keys.has(key(namespace, serviceAccount));
  }

  /** The entries in force, in the file's order. */
  entries(): Association[] {
    return [...this.#keys.values()];
  }

  get size(): number {
    return this.#keys.size;
  }

  /**
   * Reloads the file when it changes, as the peer does. ConfigMap mounts swap a `..data` symlink,
   * so the folder is watched; a file that does not parse keeps the associations in force.
   */
  watch(log: Logger): () => void {
    const file = this.file;
    if (!file) return () => {};
    let timer: NodeJS.Timeout | undefined;
    let last: string | undefined;
    const reload = () => {
      clearTimeout(timer);
      // Coalesce the burst of events one update makes.
      timer = setTimeout(async () => {
        try {
          const text = await readFile(file, 'utf8');
          if (text === last) return;
          const parsed = parseAssociations(text);
          last = text;
          const before = this.#keys.size;
          this.#keys = parsed.keys;
          if (parsed.ignored.length)
            log.warn({ file, ignored: parsed.ignored }, 'pod identity associations: members ignored');
          log.info({ file, before, associations: parsed.keys.size }, 'pod identity associations reloaded');
        } catch (err) {
          log.warn(
            { file, err: errorMessage(err) },
            'pod identity associations not reloaded; keeping the ones in force',
          );
        }
      }, 100);
    };
    let watcher: FSWatcher;
    try {
      watcher = watch(dirname(file), (_event, name) => {
        if (name === null || name === basename(file) || name.startsWith('..')) reload();
      });
    } catch (err) {
      log.warn({ file, err: errorMessage(err) }, 'cannot watch the pod identity associations; read at start-up only');
      return () => {};
    }
    watcher.on('error', (err) => log.warn({ file, err: err.message }, 'cannot watch the pod identity associations'));
    return () => {
      clearTimeout(timer);
      watcher.close();
    };
  }
}
