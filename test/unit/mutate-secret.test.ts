// Golden tests of the GEP-26 Secret core: exact derived files, every validation message,
// preservation of everything that is not derived, UPDATE rules and cross-namespace grants.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { admitSecret } from '../../src/admission/secrets.ts';
import type { AdmissionRequest } from '../../src/admission/review.ts';
import type { Secret, ServiceAccountView } from '../../src/kube/types.ts';
import { judgeSecret } from '../../src/admission/judge-secret.ts';
import { isDenial } from '../../src/errors.ts';
import { ServiceAccountUnavailable } from '../../src/kube/serviceaccount-cache.ts';
import {
  mutateSecret,
  planSecret,
  selectSecret,
  type SecretAdmission,
  type SecretMutation,
} from '../../src/mutate/secret.ts';
import { grantsReferrer } from '../../src/mutate/secret-reference.ts';
import { createSecretProviders } from '../../src/clouds/index.ts';
import { config } from '../support/builders.ts';
import {
  CHANGED_ID,
  CLIENT,
  GCP_AUDIENCE,
  GCP_EMAIL,
  GCP_PROJECT,
  ROLE_ARN,
  SUBSCRIPTION,
  TENANT,
  WIF_PROVIDER,
  roleArn,
} from '../support/identities.ts';
import {
  IMPERSONATION_URL,
  applySecretPatch,
  awsConfig,
  azureConfig,
  b64,
  gcpConfig,
  gcpCredentials,
  labelledSecret,
  textData,
} from '../support/secrets.ts';

const GRANT_A = { 'workload-identity-webhook.io/allowed-referrer-namespaces': 'team-a' };
const TOKEN_PATH = '/var/run/secrets/gardener.cloud/workload-identity/token';
const JWT = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6dGVhbS1hOmFwcCJ9.c2lnbmF0dXJl';

function core(flags: Record<string, string> = {}) {
  const c = config(flags);
  return { providers: createSecretProviders(c), defaultTokenPath: c.secretTokenPath };
}

function run(secret: Secret, extra: Partial<SecretAdmission> = {}, flags: Record<string, string> = {}): SecretMutation {
  return mutateSecret(core(flags), { secret, namespace: secret.metadata?.namespace ?? 'team-a', ...extra });
}

/** The derived data after applying the patch, decoded. */
function derived(
  secret: Secret,
  extra: Partial<SecretAdmission> = {},
  flags: Record<string, string> = {},
): Record<string, string> {
  const result = run(secret, extra, flags);
  assert.ok(result.allowed, `expected admission, got ${!result.allowed ? result.denial.message : ''}`);
  return textData(applySecretPatch(secret, result.patch));
}

function patchOf(result: SecretMutation) {
  assert.ok(result.allowed, `expected admission, got ${!result.allowed ? result.denial.message : ''}`);
  return result.patch;
}

function denied(secret: Secret, extra: Partial<SecretAdmission> = {}, flags: Record<string, string> = {}) {
  const result = run(secret, extra, flags);
  assert.equal(result.allowed, false, 'expected a denial');
  return (result as { denial: { reason: string; status: number; message: string } }).denial;
}

function sa(namespace: string, name: string, annotations: Record<string, string> = {}): ServiceAccountView {
  return { namespace, name, uid: 'u', annotations };
}

describe('AWS derivation', () => {
  test('writes roleARN, the token path and a [default] profile that assumes the role with the token', () => {
    const data = derived(labelledSecret('aws'));
    assert.equal(data.roleARN, ROLE_ARN);
    assert.equal(data.workloadIdentityTokenFile, TOKEN_PATH);
    assert.equal(
      data.credentialsFile,
      ['[default]', `role_arn = ${ROLE_ARN}`, `web_identity_token_file = ${TOKEN_PATH}`, ''].join('\n'),
    );
  });

  test('adds region from the config, else from --aws-default-region', () => {
    assert.match(
      derived(labelledSecret('aws', { config: { roleARN: ROLE_ARN, region: 'eu-central-1' } })).credentialsFile,
      /\nregion = eu-central-1\n$/,
    );
    assert.match(
      derived(labelledSecret('aws'), {}, { 'aws-default-region': 'us-east-2' }).credentialsFile,
      /\nregion = us-east-2\n$/,
    );
    const both = derived(
      labelledSecret('aws', { config: { roleARN: ROLE_ARN, region: 'eu-central-1' } }),
      {},
      { 'aws-default-region': 'us-east-2' },
    );
    assert.match(both.credentialsFile, /\nregion = eu-central-1\n$/);
  });

  test("accepts Gardener's WorkloadIdentityConfig as is, in YAML", () => {
    const yaml = `apiVersion: aws.provider.extensions.gardener.cloud/v1alpha1\nkind: WorkloadIdentityConfig\nroleARN: ${ROLE_ARN}\n`;
    assert.equal(derived(labelledSecret('aws', { config: yaml })).roleARN, ROLE_ARN);
  });

  test('the token-path annotation moves the path in every derived key', () => {
    const data = derived(
      labelledSecret('aws', { annotations: { 'workload-identity-webhook.io/token-path': '/creds/aws/token' } }),
    );
    assert.equal(data.workloadIdentityTokenFile, '/creds/aws/token');
    assert.match(data.credentialsFile, /\nweb_identity_token_file = \/creds\/aws\/token\n/);
  });

  test('--secret-token-path changes the default path', () => {
    assert.equal(
      derived(labelledSecret('aws'), {}, { 'secret-token-path': '/var/run/cloud/token' }).workloadIdentityTokenFile,
      '/var/run/cloud/token',
    );
  });

  test('emits one add per derived key on a Secret that has none', () => {
    const result = run(labelledSecret('aws'));
    assert.ok(result.allowed && result.selected);
    assert.deepEqual(
      result.patch.map((op) => [op.op, op.path]),
      [
        ['add', '/data/roleARN'],
        ['add', '/data/workloadIdentityTokenFile'],
        ['add', '/data/credentialsFile'],
      ],
    );
    assert.equal(result.derivation.audience, 'sts.amazonaws.com');
  });
});

describe('Azure derivation', () => {
  test("writes Gardener's keys and azure.env, the AZURE_* variables Azure SDKs read", () => {
    const data = derived(labelledSecret('azure'));
    assert.equal(data.clientID, CLIENT);
    assert.equal(data.tenantID, TENANT);
    assert.equal(data.subscriptionID, SUBSCRIPTION);
    assert.equal(data.workloadIdentityTokenFile, TOKEN_PATH);
    assert.equal(
      data['azure.env'],
      [
        `AZURE_CLIENT_ID=${CLIENT}`,
        `AZURE_TENANT_ID=${TENANT}`,
        `AZURE_SUBSCRIPTION_ID=${SUBSCRIPTION}`,
        `AZURE_FEDERATED_TOKEN_FILE=${TOKEN_PATH}`,
        'AZURE_AUTHORITY_HOST=https://login.microsoftonline.com/',
        '',
      ].join('\n'),
    );
  });

  test('the authority host follows --azure-cloud', () => {
    assert.match(
      derived(labelledSecret('azure'), {}, { 'azure-cloud': 'usgovernment' })['azure.env'],
      /\nAZURE_AUTHORITY_HOST=https:\/\/login\.microsoftonline\.us\/\n$/,
    );
  });

  test('azure.env parses as a dotenv file into exactly the five variables', async () => {
    const { parseEnv } = await import('node:util');
    assert.deepEqual(parseEnv(derived(labelledSecret('azure'))['azure.env']), {
      AZURE_CLIENT_ID: CLIENT,
      AZURE_TENANT_ID: TENANT,
      AZURE_SUBSCRIPTION_ID: SUBSCRIPTION,
      AZURE_FEDERATED_TOKEN_FILE: TOKEN_PATH,
      AZURE_AUTHORITY_HOST: 'https://login.microsoftonline.com/',
    });
  });
});

describe('GCP derivation', () => {
  test('writes the external_account file reading the mounted token, impersonating the service account', () => {
    const data = derived(labelledSecret('gcp'));
    assert.equal(
      data.credentialsConfig,
      JSON.stringify({
        universe_domain: 'googleapis.com',
        type: 'external_account',
        audience: GCP_AUDIENCE,
        subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
        token_url: 'https://sts.googleapis.com/v1/token',
        service_account_impersonation_url: IMPERSONATION_URL,
        credential_source: { file: TOKEN_PATH, format: { type: 'text' } },
      }),
    );
    assert.equal(data.projectID, GCP_PROJECT);
  });

  test("direct access (no impersonation) gets gcloud's token_info_url, and the token lifetime is kept", () => {
    const { service_account_impersonation_url: _, ...direct } = gcpCredentials;
    assert.equal(
      derived(labelledSecret('gcp', { config: { credentialsConfig: direct } })).credentialsConfig,
      JSON.stringify({
        universe_domain: 'googleapis.com',
        type: 'external_account',
        audience: GCP_AUDIENCE,
        subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
        token_url: 'https://sts.googleapis.com/v1/token',
        credential_source: { file: TOKEN_PATH, format: { type: 'text' } },
        token_info_url: 'https://sts.googleapis.com/v1/introspect',
      }),
    );
    const lifetime = { ...gcpCredentials, service_account_impersonation: { token_lifetime_seconds: 1800 } };
    const parsed = JSON.parse(
      derived(labelledSecret('gcp', { config: { credentialsConfig: lifetime } })).credentialsConfig,
    );
    assert.deepEqual(Object.keys(parsed).slice(5, 8), [
      'service_account_impersonation_url',
      'service_account_impersonation',
      'credential_source',
    ]);
    assert.deepEqual(parsed.service_account_impersonation, { token_lifetime_seconds: 1800 });
  });

  test('projectID comes from the config, else from the impersonated account, else is not written', () => {
    assert.equal(
      derived(labelledSecret('gcp', { config: { credentialsConfig: gcpCredentials } })).projectID,
      GCP_PROJECT,
    );
    const { service_account_impersonation_url: _, ...direct } = gcpCredentials;
    assert.equal('projectID' in derived(labelledSecret('gcp', { config: { credentialsConfig: direct } })), false);
  });

  test('the token audience is the provider, unless --gcp-audience says otherwise', () => {
    const result = run(labelledSecret('gcp'));
    assert.ok(result.allowed && result.selected);
    assert.equal(result.derivation.audience, GCP_AUDIENCE);
    const custom = run(labelledSecret('gcp'), {}, { 'gcp-audience': 'https://example.com/aud' });
    assert.ok(custom.allowed && custom.selected);
    assert.equal(custom.derivation.audience, 'https://example.com/aud');
  });

  test('accepts the https:// audience form and writes the // form STS expects', () => {
    const creds = { ...gcpCredentials, audience: `https://iam.googleapis.com/${WIF_PROVIDER}` };
    assert.equal(
      JSON.parse(derived(labelledSecret('gcp', { config: { credentialsConfig: creds } })).credentialsConfig).audience,
      GCP_AUDIENCE,
    );
  });

  test('a token_url on --gcp-allowed-token-urls is kept', () => {
    const creds = { ...gcpCredentials, token_url: 'https://sts.example.com/v1/token' };
    const data = derived(
      labelledSecret('gcp', { config: { credentialsConfig: creds } }),
      {},
      { 'gcp-allowed-token-urls': 'https://sts.googleapis.com/v1/token,https://sts.example.com/v1/token' },
    );
    assert.equal(JSON.parse(data.credentialsConfig).token_url, 'https://sts.example.com/v1/token');
  });
});

describe('validation messages', () => {
  const cases: [string, Secret, { reason: string; status: number; message: string }, Record<string, string>?][] = [
    [
      'AWS role ARN form',
      labelledSecret('aws', { config: { roleARN: 'arn:aws:iam::123:role/x' } }),
      {
        reason: 'InvalidRoleArn',
        status: 400,
        message:
          'config.roleARN="arn:aws:iam::123:role/x" is not an IAM role ARN; expected arn:<partition>:iam::<12-digit account>:role/<optional path/><name>',
      },
    ],
    [
      'AWS role ARN missing',
      labelledSecret('aws', { config: {} }),
      {
        reason: 'MissingConfigField',
        status: 400,
        message:
          'config.roleARN is required: the IAM role the token is exchanged for (arn:aws:iam::<account>:role/<name>)',
      },
    ],
    [
      'AWS region',
      labelledSecret('aws', { config: { roleARN: ROLE_ARN, region: 'Frankfurt' } }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message: 'config.region="Frankfurt" is not an AWS region (for example eu-west-1)',
      },
    ],
    [
      'a field that is not a string',
      labelledSecret('aws', { config: { roleARN: 42 } }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message: 'config.roleARN must be a string; got 42',
      },
    ],
    [
      'an unknown field (a typo)',
      labelledSecret('aws', { config: { roleArn: ROLE_ARN } }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message: 'config has unknown field "roleArn"; the aws config accepts apiVersion, kind, roleARN, region',
      },
    ],
    [
      "another provider's apiVersion and a wrong kind",
      labelledSecret('aws', {
        config: { apiVersion: 'azure.provider.extensions.gardener.cloud/v1alpha1', kind: 'Config', roleARN: ROLE_ARN },
      }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message:
          'config.apiVersion="azure.provider.extensions.gardener.cloud/v1alpha1" is not aws.provider.extensions.gardener.cloud/v1alpha1; config.kind="Config" is not WorkloadIdentityConfig',
      },
    ],
    [
      'no config key',
      labelledSecret('aws', { config: null }),
      {
        reason: 'MissingConfig',
        status: 400,
        message: 'the Secret has no data key "config"; it must hold the aws WorkloadIdentityConfig (JSON or YAML)',
      },
    ],
    [
      'a YAML alias bomb',
      labelledSecret('aws', {
        config:
          'a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\nroleARN: [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n',
      }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message:
          'data key "config" uses YAML aliases (*name), which are not accepted: write the aws config out in full',
      },
    ],
    [
      'config that is not YAML',
      labelledSecret('aws', { config: 'roleARN: [' }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message:
          'data key "config" is neither JSON nor YAML: Flow sequence in block collection must be sufficiently indented and end with a ] at line 1, column 11',
      },
    ],
    [
      'config that is a list',
      labelledSecret('aws', { config: '- a' }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message: 'data key "config" must be an object with the fields roleARN, region',
      },
    ],
    [
      'Azure ids as GUIDs',
      labelledSecret('azure', {
        config: { clientID: 'my-app', tenantID: 'contoso.onmicrosoft.com', subscriptionID: SUBSCRIPTION },
      }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message:
          'config.clientID="my-app" is not a GUID (the application (client) id of the Entra app or user-assigned managed identity, such as 00000000-0000-0000-0000-000000000000); config.tenantID="contoso.onmicrosoft.com" is not a GUID (the Entra tenant id, such as 00000000-0000-0000-0000-000000000000)',
      },
    ],
    [
      'Azure ids required',
      labelledSecret('azure', { config: { clientID: CLIENT } }),
      {
        reason: 'MissingConfigField',
        status: 400,
        message:
          'config.tenantID is required: the Entra tenant id, a GUID; config.subscriptionID is required: the Azure subscription id, a GUID',
      },
    ],
    [
      'GCP fields outside external_account',
      labelledSecret('gcp', {
        config: {
          credentialsConfig: { ...gcpCredentials, credential_source: { file: '/x' }, token_info_url: 'https://x' },
        },
      }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message:
          'config.credentialsConfig has fields "credential_source", "token_info_url" that are not allowed (credential_source is written by the webhook: it points at the mounted token); allowed: universe_domain, type, audience, subject_token_type, token_url, service_account_impersonation_url, service_account_impersonation',
      },
    ],
    [
      'GCP type and subject_token_type fixed',
      labelledSecret('gcp', {
        config: {
          credentialsConfig: {
            ...gcpCredentials,
            type: 'service_account',
            subject_token_type: 'urn:ietf:params:oauth:token-type:id_token',
          },
        },
      }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message:
          'config.credentialsConfig.type="service_account" must be "external_account"; config.credentialsConfig.subject_token_type="urn:ietf:params:oauth:token-type:id_token" must be "urn:ietf:params:oauth:token-type:jwt"',
      },
    ],
    [
      'GCP token_url https',
      labelledSecret('gcp', {
        config: { credentialsConfig: { ...gcpCredentials, token_url: 'http://sts.googleapis.com/v1/token' } },
      }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message: 'config.credentialsConfig.token_url="http://sts.googleapis.com/v1/token" must be an https URL',
      },
    ],
    [
      'GCP token_url allow-listed',
      labelledSecret('gcp', {
        config: { credentialsConfig: { ...gcpCredentials, token_url: 'https://attacker.example/v1/token' } },
      }),
      {
        reason: 'TokenUrlNotAllowed',
        status: 403,
        message:
          'config.credentialsConfig.token_url="https://attacker.example/v1/token" is not allowed; allowed: https://sts.googleapis.com/v1/token (the operator\'s --gcp-allowed-token-urls)',
      },
    ],
    [
      'GCP audience a workload identity provider',
      labelledSecret('gcp', { config: { credentialsConfig: { ...gcpCredentials, audience: 'sts.googleapis.com' } } }),
      {
        reason: 'InvalidWorkloadIdentityProvider',
        status: 400,
        message:
          'config.credentialsConfig.audience="sts.googleapis.com" is not a workload identity provider; expected projects/<project number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>',
      },
    ],
    [
      'GCP impersonation URL form',
      labelledSecret('gcp', {
        config: {
          credentialsConfig: { ...gcpCredentials, service_account_impersonation_url: 'https://attacker.example/token' },
        },
      }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message:
          'config.credentialsConfig.service_account_impersonation_url="https://attacker.example/token" must be https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/<email>:generateAccessToken',
      },
    ],
    [
      'GCP token lifetime range',
      labelledSecret('gcp', {
        config: {
          credentialsConfig: { ...gcpCredentials, service_account_impersonation: { token_lifetime_seconds: 60 } },
        },
      }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message:
          'config.credentialsConfig.service_account_impersonation.token_lifetime_seconds=60 must be a whole number from 600 to 43200',
      },
    ],
    [
      'GCP required fields',
      labelledSecret('gcp', { config: { credentialsConfig: { universe_domain: 'googleapis.com' } } }),
      {
        reason: 'MissingConfigField',
        status: 400,
        message:
          'config.credentialsConfig.type is required: "external_account"; config.credentialsConfig.subject_token_type is required: "urn:ietf:params:oauth:token-type:jwt"; config.credentialsConfig.token_url is required: the STS token endpoint, one of: https://sts.googleapis.com/v1/token; config.credentialsConfig.audience is required: the workload identity provider, //iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>',
      },
    ],
    [
      'GCP credentialsConfig missing',
      labelledSecret('gcp', { config: { projectID: GCP_PROJECT } }),
      {
        reason: 'MissingConfigField',
        status: 400,
        message:
          'config.credentialsConfig is required: the external_account configuration, as `gcloud iam workload-identity-pools create-cred-config` writes it, without credential_source',
      },
    ],
    [
      'GCP project id',
      labelledSecret('gcp', { config: { ...gcpConfig, projectID: 'My_Project' } }),
      {
        reason: 'InvalidConfig',
        status: 400,
        message:
          'config.projectID="My_Project" is not a project id (6 to 30 lowercase letters, digits and hyphens, starting with a letter)',
      },
    ],
    [
      'an unknown provider label value',
      labelledSecret('alicloud'),
      {
        reason: 'UnknownProvider',
        status: 400,
        message: 'label workload-identity-webhook.io/provider="alicloud" must be one of: aws, azure, gcp',
      },
    ],
    [
      'labels naming two providers',
      labelledSecret('aws', { gardener: 'gcp' }),
      {
        reason: 'ConflictingLabels',
        status: 400,
        message:
          'label workload-identity-webhook.io/provider="aws" and label workloadidentity.security.gardener.cloud/provider="gcp" name different providers; keep one',
      },
    ],
    [
      'a token path that could inject settings',
      labelledSecret('aws', {
        annotations: { 'workload-identity-webhook.io/token-path': '/x\ncredential_process = /bin/sh' },
      }),
      {
        reason: 'InvalidTokenPath',
        status: 400,
        message:
          'annotation workload-identity-webhook.io/token-path="/x\ncredential_process = /bin/sh" must be an absolute path of letters, digits and . _ - / (or a Windows path such as C:\\var\\run\\token)',
      },
    ],
    [
      'a relative token path',
      labelledSecret('aws', { annotations: { 'workload-identity-webhook.io/token-path': 'token' } }),
      {
        reason: 'InvalidTokenPath',
        status: 400,
        message:
          'annotation workload-identity-webhook.io/token-path="token" must be an absolute path of letters, digits and . _ - / (or a Windows path such as C:\\var\\run\\token)',
      },
    ],
    [
      'the project label without a ServiceAccount',
      labelledSecret('aws', { serviceAccount: null }),
      {
        reason: 'MissingServiceAccount',
        status: 400,
        message:
          'annotation workload-identity-webhook.io/service-account is required on a Secret labelled workload-identity-webhook.io/provider: it names the ServiceAccount the token is issued for, "name" in the Secret\'s namespace or "namespace/name"',
      },
    ],
    [
      'a malformed ServiceAccount reference',
      labelledSecret('aws', { serviceAccount: 'a/b/c' }),
      {
        reason: 'InvalidServiceAccountReference',
        status: 400,
        message:
          'annotation workload-identity-webhook.io/service-account="a/b/c" is not a ServiceAccount reference; expected "name" or "namespace/name"',
      },
    ],
  ];
  for (const [what, secret, expected, flags] of cases) {
    test(`denies ${what}`, () => assert.deepEqual(denied(secret, {}, flags), expected));
  }

  test('several problems are reported together, in one message', () => {
    const d = denied(labelledSecret('aws', { serviceAccount: 'other/app', config: { roleARN: 'nope' } }));
    assert.equal(d.reason, 'ReferenceNotGranted');
    assert.match(
      d.message,
      /^annotation workload-identity-webhook\.io\/service-account references .*; config\.roleARN="nope" is not an IAM role ARN/,
    );
  });

  test('a Windows token path is accepted', () => {
    assert.equal(
      derived(
        labelledSecret('aws', {
          annotations: { 'workload-identity-webhook.io/token-path': 'C:\\var\\run\\secrets\\token' },
        }),
      ).workloadIdentityTokenFile,
      'C:\\var\\run\\secrets\\token',
    );
  });
});

describe('preservation', () => {
  const original = labelledSecret('gcp', {
    data: { token: JWT, extra: 'keep me', 'ca.crt': '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n' },
    annotations: { 'workloadidentity.security.gardener.cloud/name': 'x' },
  });

  test('token, config and unrelated keys stay byte for byte; only derived keys are patched', () => {
    const result = run(original);
    assert.ok(result.allowed);
    for (const op of result.patch) {
      assert.ok(op.op === 'add' || op.op === 'replace');
      assert.ok(['/data/credentialsConfig', '/data/projectID'].includes(op.path), op.path);
    }
    const after = applySecretPatch(original, result.patch);
    for (const key of ['token', 'config', 'extra', 'ca.crt']) assert.equal(after.data![key], original.data![key], key);
    assert.deepEqual(after.metadata, original.metadata);
    assert.equal(after.type, original.type);
  });

  test('a Secret already derived gets an empty patch', () => {
    const once = applySecretPatch(original, patchOf(run(original)));
    const again = run(once);
    assert.ok(again.allowed);
    assert.deepEqual(again.patch, []);
  });
});

describe('UPDATE', () => {
  for (const provider of ['aws', 'azure', 'gcp']) {
    test(`${provider}: a token writer that dropped the derived keys gets them back`, () => {
      const stored = applySecretPatch(labelledSecret(provider), patchOf(run(labelledSecret(provider))));
      // What a token requestor writes: config and a fresh token, nothing else.
      const written: Secret = { ...stored, data: { config: stored.data!.config, token: b64(JWT) } };
      const result = run(written, { oldSecret: stored });
      assert.ok(result.allowed);
      assert.ok(result.patch.every((op) => op.op === 'add'));
      const after = applySecretPatch(written, result.patch);
      assert.deepEqual({ ...after.data, token: undefined }, { ...stored.data, token: undefined });
      assert.equal(after.data!.token, b64(JWT));
    });
  }

  test('a derived key changed by hand is restored with a replace', () => {
    const stored = applySecretPatch(labelledSecret('aws'), patchOf(run(labelledSecret('aws'))));
    const edited: Secret = {
      ...stored,
      data: { ...stored.data, roleARN: b64('arn:aws:iam::999999999999:role/admin') },
    };
    const result = run(edited, { oldSecret: stored });
    assert.ok(result.allowed);
    assert.deepEqual(result.patch, [{ op: 'replace', path: '/data/roleARN', value: b64(ROLE_ARN) }]);
  });

  test('a changed role ARN is re-derived (AWS keeps no account fixed)', () => {
    const stored = applySecretPatch(labelledSecret('aws'), patchOf(run(labelledSecret('aws'))));
    const other = roleArn('other');
    const next: Secret = { ...stored, data: { ...stored.data, config: b64(JSON.stringify({ roleARN: other })) } };
    assert.equal(textData(applySecretPatch(next, patchOf(run(next, { oldSecret: stored })))).roleARN, other);
  });

  const changes: [string, string, Record<string, unknown>, Record<string, unknown>, string][] = [
    [
      'Azure tenant',
      'azure',
      azureConfig,
      { ...azureConfig, tenantID: CHANGED_ID },
      `config.tenantID cannot change from "${TENANT}" to "${CHANGED_ID}": a workload identity Secret stays with one cloud account; create a new Secret for another`,
    ],
    [
      'Azure subscription',
      'azure',
      azureConfig,
      { ...azureConfig, subscriptionID: CHANGED_ID },
      `config.subscriptionID cannot change from "${SUBSCRIPTION}" to "${CHANGED_ID}": a workload identity Secret stays with one cloud account; create a new Secret for another`,
    ],
    [
      'GCP project',
      'gcp',
      gcpConfig,
      { ...gcpConfig, projectID: 'other-project' },
      `config.projectID cannot change from "${GCP_PROJECT}" to "other-project": a workload identity Secret stays with one cloud account; create a new Secret for another`,
    ],
  ];
  for (const [what, provider, before, after, message] of changes) {
    test(`the ${what} cannot change`, () => {
      const d = denied(labelledSecret(provider, { config: after }), {
        oldSecret: labelledSecret(provider, { config: before }),
      });
      assert.deepEqual(d, { reason: 'ImmutableAccount', status: 400, message });
    });
  }

  test('the Azure client may change within the same tenant and subscription', () => {
    const next = labelledSecret('azure', {
      config: { ...azureConfig, clientID: CHANGED_ID },
    });
    assert.equal(derived(next, { oldSecret: labelledSecret('azure') }).clientID, CHANGED_ID);
  });

  test('the provider cannot change', () => {
    const d = denied(labelledSecret('azure'), { oldSecret: labelledSecret('aws') });
    assert.deepEqual(d, {
      reason: 'ImmutableProvider',
      status: 400,
      message:
        'the provider cannot change from aws to azure: a workload identity Secret stays with one cloud account; create a new Secret instead',
    });
  });

  test('labelling a plain Secret is judged like a CREATE', () => {
    const plain = labelledSecret('azure', {
      provider: null,
      config: { ...azureConfig, tenantID: CHANGED_ID },
    });
    assert.equal(derived(labelledSecret('azure'), { oldSecret: plain }).tenantID, TENANT);
  });

  test('removing the labels leaves the Secret alone', () => {
    const result = run(labelledSecret('aws', { provider: null }), { oldSecret: labelledSecret('aws') });
    assert.deepEqual(result, { allowed: true, selected: false, patch: [], warnings: [] });
  });
});

describe('cross-namespace references', () => {
  const cross = () => labelledSecret('aws', { serviceAccount: 'team-b/deployer' });
  const refusal = {
    reason: 'ReferenceNotGranted',
    status: 403,
    message:
      'annotation workload-identity-webhook.io/service-account references ServiceAccount team-b/deployer in another namespace, which has not granted references from namespace team-a (or does not exist); ' +
      "the owner of namespace team-b grants it by adding team-a to that ServiceAccount's annotation workload-identity-webhook.io/allowed-referrer-namespaces (comma-separated namespaces, * for all), " +
      'for example: kubectl annotate serviceaccount -n team-b deployer workload-identity-webhook.io/allowed-referrer-namespaces=team-a',
  };

  test('a reference in the same namespace needs no grant', () => {
    const result = run(labelledSecret('aws', { serviceAccount: 'team-a/app' }));
    assert.ok(result.allowed && result.selected);
    assert.deepEqual(result.reference, { namespace: 'team-a', name: 'app' });
  });

  test('denied when the target ServiceAccount is unknown, with the same message as when it did not grant', () => {
    assert.deepEqual(denied(cross()), refusal);
    assert.deepEqual(denied(cross(), { referencedServiceAccount: sa('team-b', 'deployer') }), refusal);
  });

  test('denied when the grant lists other namespaces only', () => {
    const target = sa('team-b', 'deployer', {
      'workload-identity-webhook.io/allowed-referrer-namespaces': 'team-c, team-aa',
    });
    assert.deepEqual(denied(cross(), { referencedServiceAccount: target }), refusal);
  });

  test('a grant on another ServiceAccount does not count', () => {
    const other = sa('team-b', 'other', { 'workload-identity-webhook.io/allowed-referrer-namespaces': '*' });
    assert.deepEqual(denied(cross(), { referencedServiceAccount: other }), refusal);
  });

  test('allowed once the target lists the namespace, or *', () => {
    for (const value of ['team-a', 'team-c, team-a', '*']) {
      const target = sa('team-b', 'deployer', { 'workload-identity-webhook.io/allowed-referrer-namespaces': value });
      const result = run(cross(), { referencedServiceAccount: target });
      assert.ok(result.allowed && result.selected, value);
      assert.deepEqual(result.reference, { namespace: 'team-b', name: 'deployer' });
    }
  });

  test('changing the reference on UPDATE is checked like a new one', () => {
    const granted = sa('team-b', 'deployer', { 'workload-identity-webhook.io/allowed-referrer-namespaces': 'team-a' });
    assert.ok(run(cross(), { referencedServiceAccount: granted }).allowed);
    const moved = labelledSecret('aws', { serviceAccount: 'team-c/admin' });
    assert.equal(
      denied(moved, { oldSecret: cross(), referencedServiceAccount: undefined }).reason,
      'ReferenceNotGranted',
    );
  });

  test("Gardener's name and namespace annotations are not judged as local references", () => {
    const secret = labelledSecret('aws', {
      provider: null,
      gardener: 'aws',
      annotations: {
        'workloadidentity.security.gardener.cloud/name': 'deployer',
        'workloadidentity.security.gardener.cloud/namespace': 'garden-other-project',
        'workloadidentity.security.gardener.cloud/context-object': '{"kind":"Shoot","name":"x"}',
      },
    });
    const result = run(secret);
    assert.ok(result.allowed && result.selected);
    assert.equal(result.reference, undefined);
    const after = applySecretPatch(secret, result.patch);
    assert.deepEqual(after.metadata, secret.metadata);
  });

  test('grantsReferrer trims entries and matches whole names only', () => {
    const target = sa('b', 'x', { 'workload-identity-webhook.io/allowed-referrer-namespaces': ' a , c ' });
    assert.equal(grantsReferrer(target, 'a'), true);
    assert.equal(grantsReferrer(target, 'c'), true);
    assert.equal(grantsReferrer(target, ''), false);
    assert.equal(grantsReferrer(target, 'a , c'), false);
  });
});

describe('selection', () => {
  test('unlabelled Secrets and Gardener Secrets of other providers are left alone', () => {
    assert.equal(selectSecret(labelledSecret('aws', { provider: null })), undefined);
    assert.equal(selectSecret(labelledSecret('aws', { provider: null, gardener: 'alicloud' })), undefined);
    const providerOnly = labelledSecret('aws', {
      provider: null,
      labels: { 'workloadidentity.security.gardener.cloud/provider': 'aws' },
    });
    assert.equal(selectSecret(providerOnly), undefined);
  });

  test("Gardener's labels select a Secret without any ServiceAccount reference", () => {
    const secret = labelledSecret('azure', { provider: null, gardener: 'azure' });
    assert.deepEqual(selectSecret(secret), { provider: 'azure', project: false, gardener: true });
    assert.equal(derived(secret).clientID, CLIENT);
  });

  test('both label sets for one provider are admitted with a warning about two writers', () => {
    const result = run(labelledSecret('gcp', { gardener: 'gcp' }));
    assert.ok(result.allowed && result.selected);
    assert.deepEqual(result.warnings, [
      "the Secret carries both workload-identity-webhook.io/provider and Gardener's labels, so two token requestors would write its token; keep one of them",
    ]);
  });

  test('a service-account annotation on a Gardener-only Secret is pointed out as having no effect', () => {
    const result = run(labelledSecret('aws', { provider: null, gardener: 'aws', serviceAccount: 'app' }));
    assert.ok(result.allowed && result.selected);
    assert.deepEqual(result.warnings, [
      "annotation workload-identity-webhook.io/service-account has no effect without label workload-identity-webhook.io/provider: Gardener's token requestor writes this Secret's token",
    ]);
  });
});

describe('admission glue', () => {
  const c = core();
  function request(object: unknown, extra: Partial<AdmissionRequest> = {}): AdmissionRequest {
    return {
      uid: 'u',
      kind: { group: '', version: 'v1', kind: 'Secret' },
      namespace: 'team-a',
      operation: 'CREATE',
      object,
      ...extra,
    };
  }

  test('looks the target up only for a reference into another namespace', async () => {
    const asked: string[] = [];
    const lookup = (ns: string, name: string) => {
      asked.push(`${ns}/${name}`);
      return Promise.resolve(sa(ns, name, { 'workload-identity-webhook.io/allowed-referrer-namespaces': 'team-a' }));
    };
    const same = await admitSecret(c, lookup, request(labelledSecret('aws')));
    assert.equal(same.allowed, true);
    assert.deepEqual(asked, []);
    const other = await admitSecret(c, lookup, request(labelledSecret('aws', { serviceAccount: 'team-b/deployer' })));
    assert.equal(other.allowed, true);
    assert.deepEqual(asked, ['team-b/deployer']);
    assert.deepEqual(other.auditAnnotations, { 'secret-provider': 'aws', 'secret-service-account': 'team-b/deployer' });
  });

  test('denies a Secret whose data is not a map of strings', async () => {
    const secret = { ...labelledSecret('aws'), data: { config: 7 } };
    const decision = await admitSecret(c, () => undefined, request(secret));
    assert.deepEqual(decision.denial, {
      reason: 'MalformedObject',
      status: 400,
      message: 'the Secret cannot be read: data is not a map of base64 strings',
    });
  });

  test('admits DELETE and unlabelled Secrets untouched', async () => {
    assert.deepEqual(await admitSecret(c, () => undefined, request(labelledSecret('aws'), { operation: 'DELETE' })), {
      allowed: true,
    });
    assert.deepEqual(await admitSecret(c, () => undefined, request(labelledSecret('aws', { provider: null }))), {
      allowed: true,
    });
  });

  test('one pass: the reference is read from the Secret once, the target and the namespace once each', async () => {
    const secret = labelledSecret('aws', { serviceAccount: 'team-b/shared' });
    // Counts reads of the reference annotation, wherever the pass looks at it.
    let referenceReads = 0;
    const annotations = new Proxy(secret.metadata!.annotations!, {
      get(target, key, receiver) {
        if (key === 'workload-identity-webhook.io/service-account') referenceReads++;
        return Reflect.get(target, key, receiver);
      },
    });
    const counted = { ...secret, metadata: { ...secret.metadata, annotations } };
    const plan = planSecret(counted, 'team-a');
    assert.ok(!isDenial(plan));
    assert.deepEqual(plan.read, { namespace: 'team-b', name: 'shared' });
    const asked: string[] = [];
    const namespaces: string[] = [];
    const judged = await judgeSecret(
      c,
      plan,
      {
        serviceAccount: async (ns, name) => {
          asked.push(`${ns}/${name}`);
          return sa(ns, name, { 'workload-identity-webhook.io/allowed-referrer-namespaces': 'team-a' });
        },
        policy: async (ns) => {
          namespaces.push(ns);
          return undefined;
        },
      },
      applySecretPatch(secret, patchOf(run(secret, { referencedServiceAccount: sa('team-b', 'shared', GRANT_A) }))),
    );
    assert.ok(judged.allowed && judged.selected, judged.allowed ? '' : judged.denial.message);
    assert.deepEqual(judged.reference, { namespace: 'team-b', name: 'shared' });
    assert.equal(referenceReads, 1);
    assert.deepEqual(asked, ['team-b/shared']);
    assert.deepEqual(namespaces, ['team-a']);
  });

  test('reads nothing for a Secret that is not ours, refused by its labels, or with a reference in its own namespace', async () => {
    const asked: string[] = [];
    const reads = {
      serviceAccount: async (ns: string, name: string) => void asked.push(`sa ${ns}/${name}`),
      policy: async (ns: string) => void asked.push(`policy ${ns}`),
    };
    const unlabelled = await judgeSecret(c, planSecret(labelledSecret('aws', { provider: null }), 'team-a'), reads);
    assert.ok(unlabelled.allowed && !unlabelled.selected);
    const unknown = await judgeSecret(c, planSecret(labelledSecret('aws', { provider: 'alicloud' }), 'team-a'), reads);
    assert.equal(unknown.allowed ? '' : unknown.denial.reason, 'UnknownProvider');
    const malformed = await judgeSecret(
      c,
      planSecret(labelledSecret('aws', { serviceAccount: 'a/b/c' }), 'team-a'),
      reads,
    );
    assert.equal(malformed.allowed ? '' : malformed.denial.reason, 'InvalidServiceAccountReference');
    assert.deepEqual(asked, ['policy team-a']);
    const own = await judgeSecret(c, planSecret(labelledSecret('aws'), 'team-a'), reads);
    assert.ok(own.allowed);
    assert.deepEqual(asked, ['policy team-a', 'policy team-a']);
  });

  test('a target that cannot be read refuses the Secret on its own (503, retry), whatever the failure policy', async () => {
    const unavailable = () =>
      Promise.reject(new ServiceAccountUnavailable('team-b', 'shared', 'no answer from the API server in 2000 ms'));
    const expected = {
      reason: 'ServiceAccountUnavailable',
      status: 503,
      message:
        'ServiceAccount team-b/shared is not cached yet and could not be read (no answer from the API server in 2000 ms); it is needed to check the reference: retry shortly',
    };
    const good = await admitSecret(c, unavailable, request(labelledSecret('aws', { serviceAccount: 'team-b/shared' })));
    assert.deepEqual(good, { allowed: false, denial: expected });
    // Also when the rest is wrong too: the answer is "retry", not a list the retry may change.
    const bad = await admitSecret(
      c,
      unavailable,
      request(labelledSecret('aws', { serviceAccount: 'team-b/shared', config: { roleARN: 'nope' } })),
    );
    assert.deepEqual(bad, { allowed: false, denial: expected });
    // Any other failure is a defect: it reaches the server, which answers InternalError.
    await assert.rejects(
      admitSecret(
        c,
        () => Promise.reject(new TypeError('boom')),
        request(labelledSecret('aws', { serviceAccount: 'team-b/shared' })),
      ),
      /boom/,
    );
  });

  test('an UPDATE compares with the stored version', async () => {
    const decision = await admitSecret(
      c,
      () => undefined,
      request(labelledSecret('azure', { config: { ...azureConfig, tenantID: CHANGED_ID } }), {
        operation: 'UPDATE',
        oldObject: labelledSecret('azure'),
      }),
    );
    assert.equal(decision.denial?.reason, 'ImmutableAccount');
  });
});

test('the GCP email used in the fixtures maps to its project', () => {
  // Guards the fixture the projectID tests rely on.
  assert.equal(GCP_EMAIL, `reader@${GCP_PROJECT}.iam.gserviceaccount.com`);
  assert.equal(awsConfig.roleARN, ROLE_ARN);
});
