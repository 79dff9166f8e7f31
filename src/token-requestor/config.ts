import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { defaultOf, envName, helpRow, integer, oneOf, optionalString, string, type Setting } from '../settings.ts';
import { ConfigError } from '../errors.ts';
import { isNamespaceName } from '../model.ts';

export const WATCH_SCOPES = ['namespaces', 'cluster'] as const;
export type WatchScope = (typeof WATCH_SCOPES)[number];

/** Namespaces --namespaces may list: each is one watch (and one RoleBinding in the chart). */
export const MAX_NAMESPACES = 10_000;

/**
 * Settings of `token-requestor` only; it also reads the shared ones (--kubeconfig, --log-level,
 * --metrics-port, --metrics-host, the provider audiences, --secret-token-path,
 * --gcp-allowed-token-urls) so it judges Secrets exactly as the webhook does.
 */
export const requestorSettings = {
  leaseNamespace: {
    flag: 'lease-namespace',
    description: 'Namespace of the Lease that elects the single active instance (default: its own, in a cluster)',
    parse: optionalString,
    default: undefined,
  },
  leaseName: {
    flag: 'lease-name',
    description: 'Name of that Lease',
    parse: string,
    default: 'workload-identity-webhook-token-requestor',
  },
  leaseDurationSeconds: {
    flag: 'lease-duration-seconds',
    description: 'A standby takes over after the leader has not renewed the Lease this long',
    parse: integer(2, 300),
    default: 15,
  },
  identity: {
    flag: 'identity',
    description:
      "This instance's name in the Lease (default: the host name, in a cluster the Pod name, and a random suffix)",
    parse: optionalString,
    default: undefined,
  },
  namespaces: {
    flag: 'namespaces',
    description:
      'Comma-separated namespaces it serves: their labelled Secrets and the ServiceAccounts they reference (empty: all, which needs cluster-wide Secret access)',
    parse: namespaceList,
    default: [] as string[],
  },
  watchScope: {
    flag: 'watch-scope',
    description:
      'How it watches the labelled Secrets of --namespaces: "namespaces", one watch per namespace (multiplexed over HTTP/2; needs list and watch only there), or "cluster", one cluster-wide watch for the label (needs list and watch on Secrets cluster-wide, so it can read every Secret); without --namespaces it is always one cluster-wide watch',
    parse: oneOf(WATCH_SCOPES),
    default: 'namespaces' as WatchScope,
  },
  tokenExpiration: {
    flag: 'token-expiration',
    description: 'Lifetime of each requested token in seconds; renewed at about half of it',
    parse: integer(600, 2 ** 32),
    default: 3600,
  },
} satisfies Record<string, Setting<unknown>>;

function namespaceList(raw: string, flag: string): string[] {
  const names = [
    ...new Set(
      raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
  for (const n of names) {
    if (!isNamespaceName(n)) throw new ConfigError(`--${flag}: "${n}" is not a namespace name`);
  }
  if (names.length > MAX_NAMESPACES)
    throw new ConfigError(
      `--${flag}: ${names.length} namespaces, more than ${MAX_NAMESPACES}; with that many, use --watch-scope=cluster and grant its cluster-wide Secret read`,
    );
  return names;
}

type RequestorSettings = typeof requestorSettings;
export interface RequestorConfig {
  leaseNamespace: string;
  leaseName: string;
  leaseDurationSeconds: number;
  identity: string;
  /** Empty: every namespace. */
  namespaces: string[];
  watchScope: WatchScope;
  tokenExpiration: number;
}

const IN_CLUSTER_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export function loadRequestorConfig(
  flags: ReadonlyMap<string, string>,
  env: NodeJS.ProcessEnv = process.env,
  inClusterNamespaceFile = IN_CLUSTER_NAMESPACE,
): RequestorConfig {
  const raw: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(requestorSettings) as [keyof RequestorSettings, Setting<unknown>][]) {
    const value = flags.get(s.flag) ?? env[envName(s.flag)];
    raw[key] = value === undefined ? s.default : s.parse(value, s.flag);
  }
  let leaseNamespace = raw.leaseNamespace as string | undefined;
  if (!leaseNamespace) {
    try {
      leaseNamespace = readFileSync(inClusterNamespaceFile, 'utf8').trim() || undefined;
    } catch {
      // not in a cluster
    }
  }
  if (!leaseNamespace) throw new ConfigError('--lease-namespace is required outside a cluster');
  const leaseName = raw.leaseName as string;
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(leaseName))
    throw new ConfigError(`--lease-name="${leaseName}" is not a DNS subdomain`);
  return {
    leaseNamespace,
    leaseName,
    leaseDurationSeconds: raw.leaseDurationSeconds as number,
    identity: (raw.identity as string | undefined) ?? `${hostname()}_${randomBytes(4).toString('hex')}`,
    namespaces: raw.namespaces as string[],
    watchScope: raw.watchScope as WatchScope,
    tokenExpiration: raw.tokenExpiration as number,
  };
}

export function requestorHelp(): string {
  const lines: string[] = [];
  for (const s of Object.values(requestorSettings) as Setting<unknown>[]) {
    const def = defaultOf(s);
    lines.push(
      helpRow(`  --${s.flag} VALUE`, `${s.description}${def ? ` (default ${def})` : ''} [$${envName(s.flag)}]`),
    );
  }
  return lines.join('\n');
}
