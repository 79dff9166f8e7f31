// Proof by the official Azure SDKs: @azure/identity's and azure-identity's DefaultAzureCredential
// read what the webhook injected into a Pod, exactly as stored by a real API server, and get a
// token from a strict Entra ID stand-in with the projected token as federated client assertion.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startSdkCluster, type SdkCluster, type StartOptions } from '../sdk/cluster.ts';
import { createEntra, type Entra } from '../sdk/entra.ts';
import { tokenDigest } from '../sdk/oidc.ts';
import { refreshAcrossRotation, type Language, type SdkAnswer } from '../sdk/sdk-process.ts';
import { checkPinnedVersion } from '../sdk/versions.ts';
import { CLIENT, OTHER_ID as SYNC_CLIENT, TENANT } from '../support/identities.ts';

const NS = 'sdk-azure';
// A client id for one container of the Pod (azure.workload.identity/container-client-ids).
const AUDIENCE = 'api://AzureADTokenExchange';
const TOKEN_FILE = '/var/run/secrets/azure/tokens/azure-identity-token';
// Where the peer from release 1.6 on puts it; the same volume is mounted there.
const TOKEN_FILE_1_6 = '/var/run/secrets/azure/wi/token/azure-identity-token';
const USE = { 'azure.workload.identity/use': 'true' };
const subject = (sa: string) => `system:serviceaccount:${NS}:${sa}`;

let cluster: SdkCluster;
let entra: Entra;

before(async () => {
  cluster = await startSdkCluster({
    name: 'sdk-azure',
    namespace: NS,
    webhookArgs: ['--azure-tenant-id', TENANT],
    serviceAccounts: {
      reader: { 'azure.workload.identity/client-id': CLIENT },
      // Same application, but no federated credential of it names this ServiceAccount.
      intruder: { 'azure.workload.identity/client-id': CLIENT },
      // Container `sync` signs in as another application; the rest of the Pod as CLIENT.
      'per-container': {
        'azure.workload.identity/client-id': CLIENT,
        'azure.workload.identity/container-client-ids': `sync=${SYNC_CLIENT}`,
      },
    },
    services: (issuer) => [
      (entra = createEntra({
        issuer,
        applications: [
          {
            tenantId: TENANT,
            clientId: CLIENT,
            federatedCredentials: ['reader', 'per-container'].map((sa) => ({
              issuer: issuer.issuer,
              subject: subject(sa),
              audiences: [AUDIENCE],
            })),
          },
          {
            tenantId: TENANT,
            clientId: SYNC_CLIENT,
            federatedCredentials: [{ issuer: issuer.issuer, subject: subject('per-container'), audiences: [AUDIENCE] }],
          },
        ],
      })),
    ],
  });
});

after(async () => {
  await cluster?.stop();
});

const start = (language: Language, serviceAccount: string, options: StartOptions = {}) =>
  cluster.start(language, 'azure', serviceAccount, { labels: USE, ...options });

for (const language of ['node', 'python'] as const) {
  const sdkName = language === 'node' ? '@azure/identity' : 'azure-identity';

  describe(`${sdkName} (${language})`, () => {
    test('runs the pinned SDK version', async (t) => {
      await checkPinnedVersion(t, (await start(language, 'reader')).sdk, language, sdkName);
    });

    test('DefaultAzureCredential gets a token for the annotated client id with the projected token', async () => {
      const { container, sdk } = await start(language, 'reader');
      assert.deepEqual(container.rewrittenEnv, ['AZURE_FEDERATED_TOKEN_FILE']);
      assert.equal(container.env.AZURE_AUTHORITY_HOST, 'https://login.microsoftonline.com/');
      const answer = await sdk.credentials();
      assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
      const exchange = entra.exchanges.find((e) => e.accessToken === answer.token);
      assert.ok(exchange, 'the SDK returned a token the stand-in issued');
      assert.equal(exchange.tenantId, TENANT);
      assert.equal(exchange.clientId, CLIENT);
      assert.equal(exchange.scope, 'https://management.azure.com/.default');
      assert.equal(exchange.audience, AUDIENCE);
      assert.equal(exchange.subject, subject('reader'));
      assert.equal(exchange.tokenDigest, tokenDigest(container.tokens[0].token));
      await sdk.stop();
    });

    test('a client id per container: in one Pod, `sync` signs in as its application and `app` as the ServiceAccount one', async () => {
      const pod = await cluster.createPod('per-container', { labels: USE, sidecars: ['sync'] });
      const clientOf = async (name: string) => {
        const container = await cluster.materialise(pod, { container: name });
        const sdk = cluster.startSdk(language, 'azure', container);
        const answer = await sdk.credentials();
        assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
        const exchange = entra.exchanges.find((e) => e.accessToken === answer.token);
        assert.ok(exchange, 'the SDK returned a token the stand-in issued');
        assert.equal(exchange.subject, subject('per-container'));
        assert.equal(exchange.tokenDigest, tokenDigest(container.tokens[0].token));
        await sdk.stop();
        return exchange.clientId;
      };
      assert.equal(await clientOf('sync'), SYNC_CLIENT);
      assert.equal(await clientOf('app'), CLIENT);
    });

    test('an image that hard-coded the peer 1.6+ path finds the token there too, and the SDK exchanges it', async () => {
      const { container, sdk } = await start(language, 'reader', {
        env: { AZURE_FEDERATED_TOKEN_FILE: TOKEN_FILE_1_6 },
      });
      // The author's value stays; the file it names is the projected token, as at the 0.8-1.5 path.
      assert.deepEqual(
        container.tokens.map((t) => t.path),
        [TOKEN_FILE, TOKEN_FILE_1_6],
      );
      assert.equal(container.env.AZURE_FEDERATED_TOKEN_FILE, container.files.get(TOKEN_FILE_1_6));
      const answer = await sdk.credentials();
      assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
      const exchange = entra.exchanges.find((e) => e.accessToken === answer.token);
      assert.ok(exchange, 'the SDK returned a token the stand-in issued');
      assert.equal(exchange.subject, subject('reader'));
      assert.equal(exchange.tokenDigest, tokenDigest(container.tokens[1].token));
      await sdk.stop();
    });

    test('a token for another audience: AADSTS700212', async () => {
      const { container, sdk } = await start(language, 'reader', { tokenAudience: 'api://SomeOtherExchange' });
      assert.equal(container.tokens[0].audience, 'api://SomeOtherExchange');
      const answer = await sdk.credentials();
      assert.equal(answer.ok, false);
      assert.match(
        answer.error!.message,
        /AADSTS700212: No matching federated identity record found for presented assertion audience 'api:\/\/SomeOtherExchange'/,
      );
      await sdk.stop();
    });

    test('an expired token: AADSTS700024', async () => {
      const { container, sdk } = await start(language, 'reader');
      entra.clockOffsetSeconds = container.tokens[0].expirationSeconds + 60;
      try {
        const answer = await sdk.credentials();
        assert.equal(answer.ok, false);
        assert.match(answer.error!.message, /AADSTS700024: Client assertion is not within its valid time range/);
      } finally {
        entra.clockOffsetSeconds = 0;
        await sdk.stop();
      }
    });

    test('a ServiceAccount the application does not trust: AADSTS700213', async () => {
      const { sdk } = await start(language, 'intruder');
      const answer = await sdk.credentials();
      assert.equal(answer.ok, false);
      assert.match(
        answer.error!.message,
        new RegExp(
          `AADSTS700213: No matching federated identity record found for presented assertion subject '${subject('intruder')}'`,
        ),
      );
      await sdk.stop();
    });

    test('rotation: once the token ages, the refresh presents the replaced token file', async () => {
      const { container, sdk } = await start(language, 'reader');
      const original = container.tokens[0].token;
      const { first, second, rotated } = await refreshAcrossRotation(sdk, 'token', original, () =>
        container.rotateToken(TOKEN_FILE),
      );
      const presented = (answer: SdkAnswer) => entra.exchanges.find((e) => e.accessToken === answer.token)?.tokenDigest;
      assert.equal(presented(first), tokenDigest(original));
      assert.equal(presented(second), tokenDigest(rotated));
      await sdk.stop();
    });
  });
}
