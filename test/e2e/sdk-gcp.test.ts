// Proof by the official Google SDKs: google-auth-library (Node.js) and google-auth (Python) read
// the credential file the webhook projected into a Pod, and the credentialsConfig it derived into
// a labelled Secret (whose token the token requestor wrote), exactly as stored by a real API
// server, and exchange the token at a strict Google STS stand-in, then impersonate the annotated
// service account through IAM Credentials (or use the federated token directly).
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startSdkCluster, type SdkCluster, type StartOptions } from '../sdk/cluster.ts';
import { createGoogleCloud, type GoogleCloud } from '../sdk/google.ts';
import { tokenDigest } from '../sdk/oidc.ts';
import { refreshAcrossRotation, type Language, type SdkProcess } from '../sdk/sdk-process.ts';
import { checkPinnedVersion } from '../sdk/versions.ts';
import {
  BILLING_EMAIL as EXPORTER,
  BILLING_PROJECT_NUMBER as BILLING_NUMBER,
  BILLING_PROVIDER as BILLING,
  GCP_EMAIL as EMAIL,
  GCP_PROJECT,
  GCP_AUDIENCE as AUDIENCE,
  POOL,
  PROJECT_NUMBER,
  WIF_PROVIDER as PROVIDER,
} from '../support/identities.ts';

const NS = 'sdk-gcp';
// BILLING: a second pool, for a provider named by cloud.google.com/workload-identity-providers.
const BILLING_FILE = '/var/run/secrets/sts.googleapis.com/serviceaccount/federation-billing.json';
const TOKEN_FILE = '/var/run/secrets/sts.googleapis.com/serviceaccount/token';
// Where Gardener's extensions mount the Secret; the webhook's default --secret-token-path is in it.
const SECRET_MOUNT = '/var/run/secrets/gardener.cloud/workload-identity';
const subject = (sa: string) => `system:serviceaccount:${NS}:${sa}`;
const principal = (sa: string) =>
  `principal://iam.googleapis.com/projects/${PROJECT_NUMBER}/locations/global/workloadIdentityPools/${POOL}/subject/${subject(sa)}`;

let cluster: SdkCluster;
let google: GoogleCloud;

before(async () => {
  // The pfnet dialect in its direct mode: its file volume and path (gcloud mode's file is written
  // by the gcloud image at run time, which no test here runs).
  const impersonate = {
    'cloud.google.com/workload-identity-provider': PROVIDER,
    'cloud.google.com/service-account-email': EMAIL,
    'cloud.google.com/injection-mode': 'direct',
  };
  cluster = await startSdkCluster({
    name: 'sdk-gcp',
    namespace: NS,
    secrets: true,
    serviceAccounts: {
      // Named by labelled Secrets; it carries no annotation of its own.
      'secret-reader': {},
      reader: impersonate,
      // The Flux dialect without a service account: direct resource access.
      direct: { 'gcp.auth.fluxcd.io/workload-identity-provider': PROVIDER },
      // Not granted roles/iam.workloadIdentityUser on the service account.
      intruder: impersonate,
      // An audience the provider does not allow.
      elsewhere: { ...impersonate, 'cloud.google.com/audience': 'https://elsewhere.example.com' },
      // Direct access through the first pool, and the billing pool's provider impersonating EXPORTER.
      multi: {
        'gcp.auth.fluxcd.io/workload-identity-provider': PROVIDER,
        'cloud.google.com/workload-identity-providers': `billing=${BILLING}:${EXPORTER}`,
      },
    },
    services: (issuer) => [
      (google = createGoogleCloud({
        issuer,
        // pfnet's README has users allow its default audience on the provider.
        providers: [
          { name: PROVIDER, issuer: issuer.issuer, allowedAudiences: ['sts.googleapis.com', AUDIENCE] },
          // Only its own default audience.
          { name: BILLING, issuer: issuer.issuer },
        ],
        serviceAccounts: [
          { email: EMAIL, workloadIdentityUsers: [principal('reader'), principal('secret-reader')] },
          {
            email: EXPORTER,
            workloadIdentityUsers: [
              `principal://iam.googleapis.com/projects/${BILLING_NUMBER}/locations/global/workloadIdentityPools/billing-pool/subject/${subject('multi')}`,
            ],
          },
        ],
        projects: { [PROJECT_NUMBER]: GCP_PROJECT, [BILLING_NUMBER]: 'billing-project' },
      })),
    ],
  });
});

after(async () => {
  await cluster?.stop();
});

const start = (language: Language, serviceAccount: string, options?: StartOptions) =>
  cluster.start(language, 'gcp', serviceAccount, options);

/**
 * Google's refresh goes through STS and then impersonation: every STS exchange after the
 * replacement must present the new token, and the new access token is the impersonated one.
 */
async function checkRefreshAcrossRotation(
  sdk: SdkProcess,
  serviceAccount: string,
  original: string,
  replace: () => Promise<string>,
) {
  let exchangesBefore = 0;
  const { second, rotated } = await refreshAcrossRotation(sdk, 'token', original, replace, () => {
    assert.ok(google.exchanges.some((e) => e.tokenDigest === tokenDigest(original)));
    exchangesBefore = google.exchanges.length;
  });
  assert.ok(google.impersonations.some((i) => i.accessToken === second.token));
  const refreshed = google.exchanges.slice(exchangesBefore).filter((e) => e.principal === principal(serviceAccount));
  assert.ok(refreshed.length > 0, 'the refresh went through STS again');
  assert.ok(
    refreshed.every((e) => e.tokenDigest === tokenDigest(rotated)),
    'every exchange after the rotation presented the new token',
  );
  await sdk.stop();
}

for (const language of ['node', 'python'] as const) {
  const sdkName = language === 'node' ? 'google-auth-library' : 'google-auth';

  describe(`${sdkName} (${language})`, () => {
    test('runs the pinned SDK version', async (t) => {
      await checkPinnedVersion(t, (await start(language, 'reader')).sdk, language, sdkName);
    });

    test('GOOGLE_APPLICATION_CREDENTIALS: STS exchange, then a token of the impersonated service account', async () => {
      const { container, sdk } = await start(language, 'reader');
      assert.deepEqual(container.rewrittenEnv, ['GOOGLE_APPLICATION_CREDENTIALS']);
      const answer = await sdk.credentials();
      assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
      const impersonation = google.impersonations.find((i) => i.accessToken === answer.token);
      assert.ok(impersonation, 'the SDK returned a token the stand-in issued for the service account');
      assert.equal(impersonation.email, EMAIL);
      assert.equal(impersonation.principal, principal('reader'));
      const exchange = google.exchanges.find(
        (e) => e.principal === principal('reader') && e.tokenDigest === tokenDigest(container.tokens[0].token),
      );
      assert.ok(exchange, 'the stand-in exchanged the projected token');
      // The pfnet dialect's token carries pfnet's audience, which the provider allows.
      assert.equal(exchange.audience, 'sts.googleapis.com');
      assert.equal(exchange.subject, subject('reader'));
      await sdk.stop();
    });

    test('without a service account: the federated token itself (direct resource access)', async () => {
      const { container, sdk } = await start(language, 'direct');
      const answer = await sdk.credentials();
      assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
      const exchange = google.exchanges.find((e) => e.accessToken === answer.token);
      assert.ok(exchange, 'the SDK returned the token the stand-in issued at the exchange');
      assert.equal(exchange.principal, principal('direct'));
      assert.equal(exchange.audience, AUDIENCE);
      assert.equal(exchange.tokenDigest, tokenDigest(container.tokens[0].token));
      assert.equal(
        google.impersonations.some((i) => i.principal === principal('direct')),
        false,
      );
      await sdk.stop();
    });

    test("several providers: the default file is the first pool's; a container naming the billing file gets the billing pool's service account", async () => {
      const first = await start(language, 'multi');
      const direct = await first.sdk.credentials();
      assert.ok(direct.ok, `${JSON.stringify(direct.error)}\n${first.sdk.stderr()}`);
      assert.equal(google.exchanges.find((e) => e.accessToken === direct.token)?.provider, PROVIDER);
      await first.sdk.stop();

      const { container, sdk } = await start(language, 'multi', {
        env: { GOOGLE_APPLICATION_CREDENTIALS: BILLING_FILE },
      });
      const billingToken = container.tokens.find((t) => t.path.endsWith('/token-billing'))!;
      assert.equal(billingToken.audience, `//iam.googleapis.com/${BILLING}`);
      const answer = await sdk.credentials();
      assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
      const impersonation = google.impersonations.find((i) => i.accessToken === answer.token);
      assert.ok(impersonation, "the SDK returned a token the stand-in issued for the billing pool's service account");
      assert.equal(impersonation.email, EXPORTER);
      const exchange = google.exchanges.find((e) => e.tokenDigest === tokenDigest(billingToken.token));
      assert.ok(exchange, 'the billing file presented the billing token');
      assert.equal(exchange.provider, BILLING);
      assert.equal(exchange.subject, subject('multi'));
      await sdk.stop();
    });

    test('a token for another audience: invalid_grant at the exchange', async () => {
      const { container, sdk } = await start(language, 'elsewhere');
      assert.equal(container.tokens[0].audience, 'https://elsewhere.example.com');
      const answer = await sdk.credentials();
      assert.equal(answer.ok, false);
      assert.match(answer.error!.message, /invalid_grant/);
      assert.match(
        answer.error!.message,
        /The audience in ID Token \[https:\/\/elsewhere\.example\.com\] does not match the expected audience/,
      );
      await sdk.stop();
    });

    test('an expired token: invalid_grant at the exchange', async () => {
      const { container, sdk } = await start(language, 'reader');
      google.clockOffsetSeconds = container.tokens[0].expirationSeconds + 60;
      try {
        const answer = await sdk.credentials();
        assert.equal(answer.ok, false);
        assert.match(answer.error!.message, /invalid_grant/);
        assert.match(answer.error!.message, /ID Token expired/);
      } finally {
        google.clockOffsetSeconds = 0;
        await sdk.stop();
      }
    });

    test('a ServiceAccount not granted the service account: PERMISSION_DENIED from IAM Credentials', async () => {
      const { sdk } = await start(language, 'intruder');
      const answer = await sdk.credentials();
      assert.equal(answer.ok, false);
      assert.match(
        answer.error!.message,
        /Permission \\?'iam\.serviceAccounts\.getAccessToken\\?' denied on resource \(or it may not exist\)/,
      );
      assert.ok(
        google.exchanges.some((e) => e.principal === principal('intruder')),
        'the exchange itself succeeded',
      );
      await sdk.stop();
    });

    test('rotation: once the token ages, the refresh presents the replaced token file', async () => {
      const { container, sdk } = await start(language, 'reader');
      await checkRefreshAcrossRotation(sdk, 'reader', container.tokens[0].token, () =>
        container.rotateToken(TOKEN_FILE),
      );
    });
  });
}

let secrets = 0;
for (const language of ['node', 'python'] as const) {
  const sdkName = language === 'node' ? 'google-auth-library' : 'google-auth';

  describe(`labelled Secret, credentialsConfig: ${sdkName} (${language})`, () => {
    async function startOnSecret() {
      const name = `gcp-credentials-${++secrets}`;
      const secret = await cluster.createSecret(name, 'gcp', 'secret-reader', {
        projectID: 'my-project',
        credentialsConfig: {
          universe_domain: 'googleapis.com',
          type: 'external_account',
          audience: AUDIENCE,
          subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
          token_url: 'https://sts.googleapis.com/v1/token',
          service_account_impersonation_url: `https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${EMAIL}:generateAccessToken`,
        },
      });
      const config = JSON.parse(Buffer.from(secret.data!.credentialsConfig!, 'base64').toString('utf8'));
      assert.deepEqual(config.credential_source, { file: `${SECRET_MOUNT}/token`, format: { type: 'text' } });
      const pod = await cluster.createSecretPod(name, SECRET_MOUNT, {
        GOOGLE_APPLICATION_CREDENTIALS: `${SECRET_MOUNT}/credentialsConfig`,
      });
      const container = await cluster.materialise(pod);
      const sdk = cluster.startSdk(language, 'gcp', container);
      const token = () => readFileSync(container.files.get(`${SECRET_MOUNT}/token`)!, 'utf8');
      return { name, container, sdk, token };
    }

    test("GOOGLE_APPLICATION_CREDENTIALS naming credentialsConfig: the service account, via the Secret's token", async () => {
      const { sdk, token } = await startOnSecret();
      const answer = await sdk.credentials();
      assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
      const impersonation = google.impersonations.find((i) => i.accessToken === answer.token);
      assert.ok(impersonation, 'the SDK returned a token the stand-in issued for the service account');
      assert.equal(impersonation.email, EMAIL);
      assert.equal(impersonation.principal, principal('secret-reader'));
      const exchange = google.exchanges.find((e) => e.tokenDigest === tokenDigest(token()));
      assert.equal(exchange?.audience, AUDIENCE);
      assert.equal(exchange?.subject, subject('secret-reader'));
      await sdk.stop();
    });

    test("rotation: the token requestor renews the Secret's token; the next refresh presents it", async () => {
      const { name, container, sdk, token } = await startOnSecret();
      await checkRefreshAcrossRotation(sdk, 'secret-reader', token(), async () => {
        await cluster.renewSecretToken(name);
        await container.syncSecrets();
        return token();
      });
    });
  });
}
