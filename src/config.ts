import {
  CLOUD_SETTINGS,
  completeCloudSettings,
  deriveCloudSettings,
  type CloudSettings,
  type SettingValues,
} from './clouds/settings.ts';
import { ConfigError } from './errors.ts';
import { DEFAULT_SECRET_TOKEN_PATH, isTokenPath } from './model.ts';
import { serverSettings } from './server-settings.ts';
import { bool, defaultOf, envName, helpRow, oneOf, optionalString, type Setting } from './settings.ts';

// The webhook's settings: the server's (server-settings.ts), tenant policy and, from each cloud's
// folder, the clouds' own. Validated once at start-up; an error names the flag.

function tokenPath(raw: string, flag: string): string {
  if (!isTokenPath(raw))
    throw new ConfigError(`--${flag}="${raw}" must be an absolute path of letters, digits and . _ - /`);
  return raw;
}

/**
 * What decides the identity a Pod or Secret gets: the clouds' settings (src/clouds/settings.ts:
 * --strict and each cloud's) and the labelled Secrets' token path. Besides `serve`, the commands
 * that judge identities (preview, check-policy, trust, doctor, token-requestor) take these.
 */
export const identitySettings = {
  ...CLOUD_SETTINGS,
  // Labelled Secrets (GEP-26)
  secretTokenPath: {
    flag: 'secret-token-path',
    description:
      "Where Pods mount a labelled Secret's token key, written into its derived files (per Secret: annotation workload-identity-webhook.io/token-path)",
    parse: tokenPath,
    default: DEFAULT_SECRET_TOKEN_PATH,
  },
} satisfies Record<string, Setting<unknown>>;

/** Tenant policy (docs/policy.md). */
const policySettings = {
  policyParameters: {
    flag: 'policy-parameters',
    description:
      "The policy mode (injection.mode policy or both): keep each namespace's WorkloadIdentityParameters current from its ServiceAccounts for the MutatingAdmissionPolicy; one replica writes, elected on a Lease (needs the parameters' CRD, and RBAC on it and on Leases)",
    parse: bool,
    default: false,
    boolean: true,
  },
  policyParametersLeaseNamespace: {
    flag: 'policy-parameters-lease-namespace',
    description: "Namespace of --policy-parameters' Lease (default: the webhook's own, in a cluster)",
    parse: optionalString,
    default: undefined,
  },
  watchPolicies: {
    flag: 'watch-policies',
    description:
      "Enforce the cluster's WorkloadIdentityPolicy objects and write their status (needs the CRD of charts/workload-identity-webhook/crds, and RBAC on it and on namespaces)",
    parse: bool,
    default: false,
    boolean: true,
  },
  policyFile: {
    flag: 'policy-file',
    description:
      'Enforce the WorkloadIdentityPolicy objects of this YAML file (clusters without the CRD); read at start-up',
    parse: optionalString,
    default: undefined,
  },
  policyFailureMode: {
    flag: 'policy-failure-mode',
    description:
      'While a policy is broken: deny (refuse every cloud identity) or keep-last-good (enforce its last good version)',
    parse: oneOf(['deny', 'keep-last-good'] as const),
    default: 'deny' as const,
  },
} satisfies Record<string, Setting<unknown>>;

export const settings = { ...serverSettings, ...identitySettings, ...policySettings } satisfies Record<
  string,
  Setting<unknown>
>;

type Settings = typeof settings;

/** Every setting's value, and what the clouds derive from theirs (CloudSettings). */
export type Config = SettingValues<Settings> & CloudSettings;

/**
 * Builds the configuration from `--flag value` pairs already split by the CLI and from the
 * environment. Unknown flags are the CLI's business; this validates values and combinations.
 */
export function loadConfig(flags: ReadonlyMap<string, string>, env: NodeJS.ProcessEnv = process.env): Config {
  const config: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(settings) as [keyof Settings, Setting<unknown>][]) {
    const raw = flags.get(s.flag) ?? env[envName(s.flag)];
    config[key] = raw === undefined ? s.default : s.parse(raw, s.flag);
  }
  const c = config as Config;
  if ((c.tlsCertFile === undefined) !== (c.tlsKeyFile === undefined)) {
    throw new ConfigError('--tls-cert-file and --tls-key-file go together: set both or neither');
  }
  if (c.selfSigned && c.tlsCertFile) throw new ConfigError('--self-signed and --tls-cert-file exclude each other');
  if (c.caBundleOut && !c.selfSigned) throw new ConfigError('--ca-bundle-out needs --self-signed');
  if (c.certSecret && (c.selfSigned || c.tlsCertFile))
    throw new ConfigError('--cert-secret excludes --self-signed and --tls-cert-file: choose one certificate source');
  if (c.maxInflightRequestBytes < c.maxRequestBytes) {
    throw new ConfigError(
      `--max-inflight-request-bytes=${c.maxInflightRequestBytes} must be at least --max-request-bytes=${c.maxRequestBytes}`,
    );
  }
  if (c.certRenewBeforeSeconds >= c.certValiditySeconds) {
    throw new ConfigError(
      `--cert-renew-before-seconds=${c.certRenewBeforeSeconds} must be below --cert-validity-seconds=${c.certValiditySeconds}`,
    );
  }
  // The old CA must outlive the switch: propagation, then every replica noticing (resync at worst).
  if (c.certRenewBeforeSeconds <= 2 * (c.certPropagationSeconds + c.certResyncSeconds)) {
    throw new ConfigError(
      `--cert-renew-before-seconds=${c.certRenewBeforeSeconds} must exceed twice --cert-propagation-seconds plus --cert-resync-seconds (${2 * (c.certPropagationSeconds + c.certResyncSeconds)})`,
    );
  }
  // Settings that depend on each other within one cloud, and what they derive (files read once).
  return { ...c, ...deriveCloudSettings(c) };
}

/**
 * The settings that need a look-up at start-up (the clouds', e.g. the EC2 instance identity
 * document of --aws-compose-role-arn without an account); the commands that build Pod providers
 * await it.
 */
export async function completeConfig(c: Config): Promise<Config> {
  return { ...c, ...(await completeCloudSettings(c)) };
}

/** Help lines of the settings named (all by default): flag, description, default, environment twin. */
export function configHelp(keys: readonly (keyof Settings)[] = Object.keys(settings) as (keyof Settings)[]): string {
  const lines: string[] = [];
  for (const s of keys.map((k) => settings[k]) as Setting<unknown>[]) {
    const def = defaultOf(s);
    lines.push(
      helpRow(
        `  --${s.flag}${s.boolean ? '' : ' VALUE'}`,
        `${s.description}${def ? ` (default ${def})` : ''} [$${envName(s.flag)}]`,
      ),
    );
  }
  return lines.join('\n');
}
