import { denial, type Denial, isDenial } from '../../errors.ts';
import { PROJECT_ID_PART } from './facts.ts';
import {
  externalAccountConfig,
  parseWorkloadIdentityProvider,
  projectOfEmail,
  type WorkloadIdentityProvider,
} from './external-account.ts';
import {
  requiredString,
  stringField,
  type ConfigObject,
  type SecretDerivation,
  type SecretDerivationContext,
  type SecretProvider,
} from '../secret-config.ts';

const EXTERNAL_ACCOUNT = 'external_account';
const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

/**
 * The external_account fields a Secret may set. Everything else is refused: `credential_source`
 * is the webhook's to write, and any other URL field would tell SDKs where to send tokens.
 */
const CREDENTIALS_FIELDS = [
  'universe_domain',
  'type',
  'audience',
  'subject_token_type',
  'token_url',
  'service_account_impersonation_url',
  'service_account_impersonation',
] as const;
const IMPERSONATION_URL =
  /^https:\/\/iamcredentials\.googleapis\.com\/v1\/projects\/-\/serviceAccounts\/([a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+):generateAccessToken$/;
const IMPERSONATION_FORM =
  'https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/<email>:generateAccessToken';
const PROJECT_ID = new RegExp(`^${PROJECT_ID_PART}$`);
const DOMAIN = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/;
const MIN_LIFETIME = 600;
const MAX_LIFETIME = 43200;

interface GcpSecretOptions {
  /** `token_url` values a Secret may use (--gcp-allowed-token-urls); each an https URL. */
  allowedTokenUrls: readonly string[];
  /** Token audience (--gcp-audience); default: the config's workload identity provider. */
  audience: string | undefined;
}

/**
 * GEP-26 GCP: Gardener's WorkloadIdentityConfig (`projectID`, `credentialsConfig`), derived into
 * `credentialsConfig` (the external_account file GOOGLE_APPLICATION_CREDENTIALS points at, reading
 * the token from the mounted file) and `projectID`.
 */
export function createGcpSecretProvider(options: GcpSecretOptions): SecretProvider {
  return {
    name: 'gcp',
    fields: ['projectID', 'credentialsConfig'],
    derive: (config: ConfigObject, { tokenPath }: SecretDerivationContext) => deriveKeys(options, config, tokenPath),
  };
}

function deriveKeys(options: GcpSecretOptions, config: ConfigObject, tokenPath: string): SecretDerivation | Denial[] {
  const problems: Denial[] = [];
  const projectID = stringField(config, 'projectID', problems);
  if (projectID && !PROJECT_ID.test(projectID)) {
    problems.push(
      denial(
        'InvalidConfig',
        `config.projectID="${projectID}" is not a project id (6 to 30 lowercase letters, digits and hyphens, starting with a letter)`,
      ),
    );
  }
  const creds = credentialsObject(config.credentialsConfig, problems);
  if (creds === undefined) return problems;
  const read = readCredentials(options, creds, problems);
  const { provider, email } = read;
  if (problems.length > 0 || !provider || isDenial(provider)) return problems;

  const credentialsConfig = credentialsFile({ ...read, provider }, tokenPath);
  const project = projectID || (email ? projectOfEmail(email) : undefined);
  const keys: Record<string, string> = { credentialsConfig: JSON.stringify(credentialsConfig) };
  if (project) keys.projectID = project;
  const audience = options.audience || `//iam.googleapis.com/${provider.name}`;
  const identity: Record<string, string> = { workloadIdentityProvider: provider.name, audience };
  if (email) identity.serviceAccountEmail = email;
  if (project) identity.projectID = project;
  return { provider: 'gcp', keys, account: { projectID: project ?? '' }, audience, identity };
}

/** `credentialsConfig`, which must be an object; undefined (with the problem noted) when it is not. */
function credentialsObject(raw: unknown, problems: Denial[]): ConfigObject | undefined {
  if (raw === undefined || raw === null) {
    problems.push(
      denial(
        'MissingConfigField',
        'config.credentialsConfig is required: the external_account configuration, as `gcloud iam workload-identity-pools create-cred-config` writes it, without credential_source',
      ),
    );
    return undefined;
  }
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    problems.push(
      denial('InvalidConfig', 'config.credentialsConfig must be an object (the external_account configuration)'),
    );
    return undefined;
  }
  return raw as ConfigObject;
}

const at = (key: string) => `config.credentialsConfig.${key}`;

/** What the credentials config says, each field checked; `problems` holds what is wrong. */
interface Credentials {
  tokenUrl: string | undefined;
  provider: WorkloadIdentityProvider | Denial | undefined;
  universe: string | undefined;
  email: string | undefined;
  lifetime: number | undefined;
}

function readCredentials(options: GcpSecretOptions, creds: ConfigObject, problems: Denial[]): Credentials {
  const extra = Object.keys(creds).filter((k) => !(CREDENTIALS_FIELDS as readonly string[]).includes(k));
  if (extra.length > 0) {
    const hint = extra.includes('credential_source')
      ? ' (credential_source is written by the webhook: it points at the mounted token)'
      : '';
    problems.push(
      denial(
        'InvalidConfig',
        `config.credentialsConfig has field${extra.length > 1 ? 's' : ''} ${extra.map((k) => `"${k}"`).join(', ')} that ${extra.length > 1 ? 'are' : 'is'} not allowed${hint}; allowed: ${CREDENTIALS_FIELDS.join(', ')}`,
      ),
    );
  }
  requireConstant(creds, 'type', EXTERNAL_ACCOUNT, problems);
  requireConstant(creds, 'subject_token_type', JWT_TOKEN_TYPE, problems);
  const tokenUrl = readTokenUrl(options, creds, problems);
  const rawAudience = requiredString(
    creds,
    'audience',
    problems,
    'the workload identity provider, //iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>',
    at('audience'),
  );
  const provider = rawAudience === undefined ? undefined : parseWorkloadIdentityProvider(rawAudience, at('audience'));
  if (provider && isDenial(provider)) problems.push(provider);
  const universe = stringField(creds, 'universe_domain', problems, at('universe_domain'));
  if (universe !== undefined && !DOMAIN.test(universe)) {
    problems.push(
      denial(
        'InvalidConfig',
        `${at('universe_domain')}="${universe}" is not a domain name (for example googleapis.com)`,
      ),
    );
  }
  const { email, lifetime } = readImpersonation(creds, problems);
  return { tokenUrl, provider, universe, email, lifetime };
}

/** A field whose one value is fixed (`type`, `subject_token_type`): required, and that value. */
function requireConstant(creds: ConfigObject, key: string, value: string, problems: Denial[]): void {
  const given = requiredString(creds, key, problems, `"${value}"`, at(key));
  if (given !== undefined && given !== value)
    problems.push(denial('InvalidConfig', `${at(key)}="${given}" must be "${value}"`));
}

/** `token_url`: an https URL the operator allows (--gcp-allowed-token-urls), since SDKs send the token there. */
function readTokenUrl(options: GcpSecretOptions, creds: ConfigObject, problems: Denial[]): string | undefined {
  const allowed = options.allowedTokenUrls;
  const tokenUrl = requiredString(
    creds,
    'token_url',
    problems,
    `the STS token endpoint, one of: ${allowed.join(', ')}`,
    at('token_url'),
  );
  if (tokenUrl === undefined) return undefined;
  if (!isHttpsUrl(tokenUrl)) {
    problems.push(denial('InvalidConfig', `${at('token_url')}="${tokenUrl}" must be an https URL`));
  } else if (!allowed.includes(tokenUrl)) {
    problems.push(
      denial(
        'TokenUrlNotAllowed',
        `${at('token_url')}="${tokenUrl}" is not allowed; allowed: ${allowed.join(', ')} (the operator's --gcp-allowed-token-urls)`,
      ),
    );
  }
  return tokenUrl;
}

/** The Google service account to impersonate, from its URL, and the access token's lifetime. */
function readImpersonation(
  creds: ConfigObject,
  problems: Denial[],
): { email: string | undefined; lifetime: number | undefined } {
  let email: string | undefined;
  const key = 'service_account_impersonation_url';
  const impersonationUrl = stringField(creds, key, problems, at(key));
  if (impersonationUrl !== undefined) {
    email = IMPERSONATION_URL.exec(impersonationUrl)?.[1];
    if (!email)
      problems.push(denial('InvalidConfig', `${at(key)}="${impersonationUrl}" must be ${IMPERSONATION_FORM}`));
  }
  const lifetime = tokenLifetime(creds.service_account_impersonation, impersonationUrl !== undefined, problems);
  return { email, lifetime };
}

/**
 * The external_account file the Secret gets: gcloud's, in its key order, with the config's token
 * endpoint and universe, and the impersonated token's lifetime after the impersonation URL.
 */
function credentialsFile(
  { provider, email, tokenUrl, universe, lifetime }: Credentials & { provider: WorkloadIdentityProvider },
  tokenPath: string,
): Record<string, unknown> {
  const file = externalAccountConfig({ provider, serviceAccountEmail: email, tokenFile: tokenPath });
  const overrides: Record<string, unknown> = { token_url: tokenUrl };
  if (universe) overrides.universe_domain = universe;
  const credentialsConfig: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(file)) {
    if (key === 'token_info_url') {
      // gcloud's introspection endpoint sits beside the token endpoint it was given.
      if (tokenUrl?.endsWith('/v1/token')) credentialsConfig[key] = tokenUrl.slice(0, -'token'.length) + 'introspect';
      continue;
    }
    credentialsConfig[key] = key in overrides ? overrides[key] : value;
    if (key === 'service_account_impersonation_url' && lifetime !== undefined) {
      credentialsConfig.service_account_impersonation = { token_lifetime_seconds: lifetime };
    }
  }
  return credentialsConfig;
}

function isHttpsUrl(value: string): boolean {
  const url = URL.parse(value);
  return url?.protocol === 'https:' && url.hostname !== '' && url.username === '' && url.password === '';
}

function tokenLifetime(value: unknown, impersonating: boolean, problems: Denial[]): number | undefined {
  if (value === undefined || value === null) return undefined;
  const path = 'config.credentialsConfig.service_account_impersonation';
  if (!impersonating) {
    problems.push(denial('InvalidConfig', `${path} needs service_account_impersonation_url`));
    return undefined;
  }
  if (
    typeof value !== 'object' ||
    Array.isArray(value) ||
    Object.keys(value).some((k) => k !== 'token_lifetime_seconds')
  ) {
    problems.push(denial('InvalidConfig', `${path} may hold only token_lifetime_seconds`));
    return undefined;
  }
  const seconds = (value as { token_lifetime_seconds?: unknown }).token_lifetime_seconds;
  if (seconds === undefined) return undefined;
  if (typeof seconds !== 'number' || !Number.isInteger(seconds) || seconds < MIN_LIFETIME || seconds > MAX_LIFETIME) {
    problems.push(
      denial(
        'InvalidConfig',
        `${path}.token_lifetime_seconds=${JSON.stringify(seconds)} must be a whole number from ${MIN_LIFETIME} to ${MAX_LIFETIME}`,
      ),
    );
    return undefined;
  }
  return seconds;
}
