// What every provider's Secret derivation shares: reading `config` (Gardener's
// WorkloadIdentityConfig of the provider, JSON or YAML) strictly, so a typo such as `roleArn`
// is refused instead of silently producing a Secret without credentials.
import { parseDocument } from 'yaml';
import { denial, type Denial } from '../errors.ts';
import type { ProviderName } from './registry.ts';
import { isObject } from '../model.ts';

export type ConfigObject = Record<string, unknown>;

export interface SecretDerivationContext {
  /** Where the Pod mounts the Secret's `token` key: the path written into every derived file. */
  tokenPath: string;
}

export interface SecretDerivation {
  provider: ProviderName;
  /** Derived data keys and their text values (the core base64-encodes them). */
  keys: Record<string, string>;
  /** Values naming the cloud account; an UPDATE may not change them (GEP-26). Key: config field. */
  account: Record<string, string>;
  /** Audience of the token a token requestor requests for this Secret. */
  audience: string;
  /** The identity claimed, for logs and audit annotations. */
  identity: Record<string, string>;
}

export interface SecretProvider {
  readonly name: ProviderName;
  /** Config fields besides apiVersion and kind. */
  readonly fields: readonly string[];
  derive(config: ConfigObject, ctx: SecretDerivationContext): SecretDerivation | Denial[];
}

/** Gardener's provider extensions' API group for each provider's WorkloadIdentityConfig. */
function gardenerApiVersion(provider: ProviderName): string {
  return `${provider}.provider.extensions.gardener.cloud/v1alpha1`;
}

/** Decodes and parses `config` (base64 in `data`), checking apiVersion, kind and field names. */
export function parseSecretConfig(
  provider: SecretProvider,
  base64: string | undefined,
): { config: ConfigObject } | { denial: Denial } {
  if (base64 === undefined) {
    return {
      denial: denial(
        'MissingConfig',
        `the Secret has no data key "config"; it must hold the ${provider.name} WorkloadIdentityConfig (JSON or YAML)`,
      ),
    };
  }
  const text = Buffer.from(base64, 'base64').toString('utf8');
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) {
    return {
      denial: denial(
        'InvalidConfig',
        `data key "config" is neither JSON nor YAML: ${doc.errors[0].message.split('\n')[0].replace(/:$/, '')}`,
      ),
    };
  }
  let value: unknown;
  try {
    // No config needs YAML aliases; refusing them defuses alias bombs (exponential expansion).
    value = doc.toJS({ maxAliasCount: 0 });
  } catch {
    return {
      denial: denial(
        'InvalidConfig',
        `data key "config" uses YAML aliases (*name), which are not accepted: write the ${provider.name} config out in full`,
      ),
    };
  }
  if (!isObject(value)) {
    return {
      denial: denial(
        'InvalidConfig',
        `data key "config" must be an object with the fields ${provider.fields.join(', ')}`,
      ),
    };
  }
  const problems = fieldProblems(provider, value);
  if (problems.length > 0) return { denial: denial('InvalidConfig', problems.join('; ')) };
  return { config: value };
}

/** apiVersion and kind, if given, are Gardener's; every other field is one the provider reads. */
function fieldProblems(provider: SecretProvider, config: ConfigObject): string[] {
  const problems: string[] = [];
  const apiVersion = gardenerApiVersion(provider.name);
  if (config.apiVersion !== undefined && config.apiVersion !== apiVersion) {
    problems.push(`config.apiVersion=${JSON.stringify(config.apiVersion)} is not ${apiVersion}`);
  }
  if (config.kind !== undefined && config.kind !== 'WorkloadIdentityConfig') {
    problems.push(`config.kind=${JSON.stringify(config.kind)} is not WorkloadIdentityConfig`);
  }
  const allowed = new Set(['apiVersion', 'kind', ...provider.fields]);
  const unknown = Object.keys(config).filter((k) => !allowed.has(k));
  if (unknown.length > 0) {
    problems.push(
      `config has unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')}; the ${provider.name} config accepts ${[...allowed].join(', ')}`,
    );
  }
  return problems;
}

/** A string field: undefined when absent, a message when present but not a string. */
export function stringField(
  config: ConfigObject,
  key: string,
  problems: Denial[],
  path = `config.${key}`,
): string | undefined {
  const value = config[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') {
    problems.push(denial('InvalidConfig', `${path} must be a string; got ${JSON.stringify(value)}`));
    return undefined;
  }
  return value.trim();
}

export function requiredString(
  config: ConfigObject,
  key: string,
  problems: Denial[],
  what: string,
  path = `config.${key}`,
): string | undefined {
  const before = problems.length;
  const value = stringField(config, key, problems, path);
  if (problems.length === before && !value) {
    problems.push(denial('MissingConfigField', `${path} is required: ${what}`));
    return undefined;
  }
  return value;
}
