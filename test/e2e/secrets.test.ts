// End to end for GEP-26 Secrets: the webhook runs as `serve` and the token requestor as
// `token-requestor` (with exactly the RBAC the chart grants it), both in child processes, against
// a real kube-apiserver. Every assertion is on what the API server stored or answered.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { CoreV1Api, type V1Pod, type V1Secret, type V1ServiceAccount } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  verifyServiceAccountToken,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { createLogger } from '../../src/log.ts';
import { registerWebhook, startWebhook, until, type WebhookProcess } from '../support/webhook.ts';
import {
  CHANGED_ID,
  CLIENT,
  GCP_AUDIENCE,
  GCP_PROJECT,
  ROLE_ARN,
  SUBSCRIPTION,
  TENANT,
  roleArn,
} from '../support/identities.ts';
import { b64, fakeJwt, labelledSecret, textData, unb64 } from '../support/secrets.ts';
import {
  leaseHolder,
  requestorKubeconfig,
  startTokenRequestor,
  waitForSecretWebhook,
  type RequestorProcess,
} from '../support/token-requestor.ts';

const TOKEN_PATH = '/var/run/secrets/gardener.cloud/workload-identity/token';
const GRANT = 'workload-identity-webhook.io/allowed-referrer-namespaces';
const RENEW = 'workload-identity-webhook.io/renew-requested-at';
const SYSTEM = 'wiw-system';
const LEASE = 'wiw-token-requestor';

let cp: ControlPlane;
let wh: WebhookProcess;
let core: CoreV1Api;

async function create(secret: ReturnType<typeof labelledSecret>): Promise<V1Secret> {
  return core.createNamespacedSecret({ namespace: secret.metadata!.namespace!, body: secret as V1Secret });
}
const read = (namespace: string, name: string) => core.readNamespacedSecret({ namespace, name });

/** The API server's message for a refused write (the webhook's denial, prefixed by the API server). */
async function refusal(write: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await write;
  } catch (err) {
    const e = err as { code: number; body: string };
    return { code: e.code, message: JSON.parse(e.body).message };
  }
  assert.fail('expected the API server to refuse the write');
}

before(async () => {
  cp = await startControlPlane({ name: 'e2e-secrets' });
  core = cp.kubeConfig().makeApiClient(CoreV1Api);
  for (const ns of ['team-a', 'team-b', 'plain', 'apps', SYSTEM]) await createNamespace(cp, ns);
  await createServiceAccount(cp, 'team-a', 'app');
  await createServiceAccount(cp, 'team-b', 'deployer');
  await createServiceAccount(cp, 'team-b', 'shared', { [GRANT]: 'team-a' });
  wh = await startWebhook(cp);
  const clientConfig = { url: `${wh.url}/mutate`, caBundle: Buffer.from(wh.caPem).toString('base64') };
  const rules = [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['secrets'] }];
  // The two selections the chart registers: the project's label, and Gardener's two labels.
  await registerWebhook(
    cp,
    undefined,
    'workload-identity-secrets',
    [
      {
        clientConfig,
        rules,
        reinvocationPolicy: 'Never',
        objectSelector: { matchExpressions: [{ key: 'workload-identity-webhook.io/provider', operator: 'Exists' }] },
      },
      {
        clientConfig,
        rules,
        reinvocationPolicy: 'Never',
        objectSelector: {
          matchLabels: { 'security.gardener.cloud/purpose': 'workload-identity-token-requestor' },
          matchExpressions: [{ key: 'workloadidentity.security.gardener.cloud/provider', operator: 'Exists' }],
        },
      },
    ],
    'team-a',
  );
  await waitForSecretWebhook(cp, 'team-a', 'app');
});

after(async () => {
  await wh?.stop();
  await cp?.stop();
});

describe('the webhook', () => {
  test('labelled Secrets created through the API get the derived keys', async () => {
    const aws = textData(await create(labelledSecret('aws', { name: 'created-aws' })));
    assert.equal(aws.roleARN, ROLE_ARN);
    assert.equal(aws.credentialsFile, `[default]\nrole_arn = ${ROLE_ARN}\nweb_identity_token_file = ${TOKEN_PATH}\n`);
    const azure = textData(await create(labelledSecret('azure', { name: 'created-azure' })));
    assert.equal(azure.clientID, CLIENT);
    assert.equal(azure.tenantID, TENANT);
    assert.match(azure['azure.env'], new RegExp(`^AZURE_CLIENT_ID=${CLIENT}\n`));
    const gcp = textData(await create(labelledSecret('gcp', { name: 'created-gcp' })));
    assert.equal(JSON.parse(gcp.credentialsConfig).credential_source.file, TOKEN_PATH);
    assert.equal(gcp.projectID, GCP_PROJECT);
    // What the API server stored, not only what it answered.
    assert.equal(textData(await read('team-a', 'created-gcp')).credentialsConfig, gcp.credentialsConfig);
  });

  test('stringData is merged before admission, so a config written as text works', async () => {
    const secret = labelledSecret('aws', { name: 'string-data', config: null });
    (secret as { stringData?: Record<string, string> }).stringData = {
      config: `roleARN: ${ROLE_ARN}\nregion: eu-west-1\n`,
    };
    const stored = textData(await create(secret));
    assert.match(stored.credentialsFile, /\nregion = eu-west-1\n$/);
  });

  test('an update of the config is re-derived', async () => {
    const stored = await create(labelledSecret('aws', { name: 'updated' }));
    const other = roleArn('other');
    stored.data!.config = b64(JSON.stringify({ roleARN: other }));
    const updated = await core.replaceNamespacedSecret({ namespace: 'team-a', name: 'updated', body: stored });
    assert.equal(unb64(updated.data!.roleARN), other);
    assert.ok(unb64(updated.data!.credentialsFile)!.includes(`role_arn = ${other}\n`), 'the credentials file names it');
  });

  test('a token-only update that drops the derived keys is re-derived', async () => {
    const stored = await create(labelledSecret('azure', { name: 'token-only' }));
    const derivedBefore = textData(stored);
    // What Gardener's token requestor writes: config and token, nothing else.
    stored.data = { config: stored.data!.config, token: b64('header.payload.signature') };
    const updated = textData(
      await core.replaceNamespacedSecret({ namespace: 'team-a', name: 'token-only', body: stored }),
    );
    assert.deepEqual({ ...updated, token: undefined }, { ...derivedBefore, token: undefined });
    assert.equal(updated.token, 'header.payload.signature');
  });

  test('a derived key edited by hand is restored', async () => {
    await create(labelledSecret('aws', { name: 'hand-edited' }));
    await core.patchNamespacedSecret({
      namespace: 'team-a',
      name: 'hand-edited',
      body: [{ op: 'replace', path: '/data/roleARN', value: b64('arn:aws:iam::999999999999:role/admin') }],
    });
    assert.equal(textData(await read('team-a', 'hand-edited')).roleARN, ROLE_ARN);
  });

  test('the Azure tenant cannot change on UPDATE', async () => {
    const stored = await create(labelledSecret('azure', { name: 'tenant-fixed' }));
    stored.data!.config = b64(
      JSON.stringify({
        clientID: CLIENT,
        tenantID: CHANGED_ID,
        subscriptionID: SUBSCRIPTION,
      }),
    );
    const refused = await refusal(
      core.replaceNamespacedSecret({ namespace: 'team-a', name: 'tenant-fixed', body: stored }),
    );
    assert.equal(refused.code, 400);
    assert.ok(
      refused.message.includes(`denied the request: config.tenantID cannot change from "${TENANT}" to "${CHANGED_ID}"`),
      refused.message,
    );
  });

  test('a bad config is refused with the exact message', async () => {
    const refused = await refusal(
      create(labelledSecret('aws', { name: 'bad-arn', config: { roleARN: 'arn:aws:iam::123:role/x' } })),
    );
    assert.equal(refused.code, 400);
    assert.match(
      refused.message,
      /: config\.roleARN="arn:aws:iam::123:role\/x" is not an IAM role ARN; expected arn:<partition>:iam::<12-digit account>:role\/<optional path\/><name>$/,
    );
  });

  test("the API server's error, logged, keeps its status and message and drops the response body and headers", async () => {
    const secret = labelledSecret('aws', { name: 'logged-refusal', config: { roleARN: 'nope' }, data: { token: 'x' } });
    const err = await create(secret).then(
      () => assert.fail('expected a refusal'),
      (e: unknown) => e as Error & { body: unknown; headers: Record<string, string> },
    );
    // What client-node puts in the error: the body and the headers, also inside its message.
    assert.ok(err.body && err.headers['audit-id'] && err.message.includes(err.headers['audit-id']));
    const lines: string[] = [];
    createLogger('info', { write: (line: string) => void lines.push(line) }).warn({ err }, 'create failed');
    const logged = JSON.parse(lines[0]).err;
    assert.equal(logged.type, 'ApiException');
    assert.equal(logged.code, 400);
    assert.match(
      logged.message,
      /^HTTP 400 BadRequest: admission webhook "[^"]+" denied the request: config\.roleARN="nope" is not an IAM role ARN/,
    );
    assert.equal(lines[0].includes(err.headers['audit-id']), false);
    assert.equal(lines[0].includes('Body:') || 'body' in logged || 'headers' in logged, false);
  });

  test('unlabelled Secrets are never sent to the webhook', async () => {
    const before = await wh.metrics();
    await core.createNamespacedSecret({
      namespace: 'plain',
      body: { metadata: { name: 'unlabelled' }, data: { config: b64(JSON.stringify({ roleARN: 'not-an-arn' })) } },
    });
    const unlabelled = await read('plain', 'unlabelled');
    assert.deepEqual(Object.keys(unlabelled.data!), ['config']);
    // A labelled Secret created afterwards is a barrier: once its decision is logged, any decision
    // about the unlabelled one would have been logged before it.
    await create(labelledSecret('aws', { name: 'barrier', namespace: 'plain', serviceAccount: 'team-a/app' })).catch(
      () => undefined,
    );
    await until(
      'the barrier to be judged',
      () => wh.logs().some((l) => l.msg === 'admission' && l.name === 'barrier') || undefined,
    );
    assert.equal(
      wh.logs().some((l) => l.name === 'unlabelled'),
      false,
    );
    const secretReviews = (text: string) =>
      [...text.matchAll(/^wiw_admission_requests_total\{kind="Secret",operation="CREATE",[^}]*\} (\d+)/gm)].reduce(
        (n, m) => n + Number(m[1]),
        0,
      );
    assert.equal(secretReviews(await wh.metrics()) - secretReviews(before), 1);
  });

  test('a cross-namespace reference is denied, then allowed once the target grants it', async () => {
    const secret = () => labelledSecret('aws', { name: 'cross', serviceAccount: 'team-b/deployer' });
    const refused = await refusal(create(secret()));
    assert.equal(refused.code, 403);
    assert.match(
      refused.message,
      /references ServiceAccount team-b\/deployer in another namespace, which has not granted references from namespace team-a \(or does not exist\); .*kubectl annotate serviceaccount -n team-b deployer workload-identity-webhook\.io\/allowed-referrer-namespaces=team-a$/,
    );
    await core.patchNamespacedServiceAccount({
      namespace: 'team-b',
      name: 'deployer',
      body: [{ op: 'add', path: '/metadata/annotations', value: { [GRANT]: 'team-c,team-a' } }],
    });
    // The webhook learns of the grant through its ServiceAccount watch.
    const stored = await until('the grant to be honoured', async () => create(secret()).catch(() => undefined));
    assert.equal(textData(stored).roleARN, ROLE_ARN);
  });

  test("Gardener's labels are honoured and its annotations left untouched and unjudged", async () => {
    const annotations = {
      'workloadidentity.security.gardener.cloud/name': 'deployer',
      'workloadidentity.security.gardener.cloud/namespace': 'garden-other',
      'workloadidentity.security.gardener.cloud/context-object': '{"kind":"Shoot","name":"s"}',
    };
    const stored = await create(
      labelledSecret('gcp', { name: 'gardener', provider: null, gardener: 'gcp', annotations }),
    );
    assert.equal(JSON.parse(textData(stored).credentialsConfig).type, 'external_account');
    assert.deepEqual(stored.metadata!.annotations, annotations);
  });
});

describe('the token requestor', () => {
  let r1: RequestorProcess;
  let r2: RequestorProcess | undefined;
  let r3: RequestorProcess | undefined;
  let kubeconfig: string;
  const args = [
    '--lease-namespace',
    SYSTEM,
    '--lease-name',
    LEASE,
    '--lease-duration-seconds',
    '3',
    '--token-expiration',
    '600',
  ];

  async function tokenOf(namespace: string, name: string, differentFrom?: string): Promise<string> {
    return until(
      `a token in ${namespace}/${name}`,
      async () => {
        const token = unb64((await read(namespace, name)).data?.token);
        return token && token !== differentFrom ? token : undefined;
      },
      30_000,
    );
  }

  before(async () => {
    // A Secret whose grant is withdrawn after it was admitted: the webhook would now refuse it,
    // so the requestor must give it no token.
    await createServiceAccount(cp, 'team-b', 'withdrawn', { [GRANT]: 'team-a' });
    await until('the webhook to see the grant', async () =>
      create(labelledSecret('aws', { name: 'withdrawn', serviceAccount: 'team-b/withdrawn' })).catch(() => undefined),
    );
    await core.patchNamespacedServiceAccount({
      namespace: 'team-b',
      name: 'withdrawn',
      body: [{ op: 'remove', path: '/metadata/annotations' }],
    });
    kubeconfig = await requestorKubeconfig(cp, SYSTEM, LEASE);
    r1 = await startTokenRequestor(cp, kubeconfig, args);
    await until(
      'the first requestor to hold the Lease',
      async () => (await leaseHolder(cp, SYSTEM, LEASE)) === r1.identity || undefined,
    );
  });

  after(async () => {
    await r1?.stop();
    await r2?.stop();
    await r3?.stop();
  });

  test('writes a token that verifies against the cluster JWKS for the provider audience and the ServiceAccount', async () => {
    await create(labelledSecret('aws', { name: 'requested-aws' }));
    const token = await tokenOf('team-a', 'requested-aws');
    const claims = await verifyServiceAccountToken(cp, token, {
      audience: 'sts.amazonaws.com',
      namespace: 'team-a',
      name: 'app',
    });
    assert.equal(claims.exp! - claims.iat!, 600);
    // Bound to the Secret: deleting the Secret revokes the token.
    assert.equal((claims['kubernetes.io'] as { secret?: { name: string } }).secret?.name, 'requested-aws');
    // The token write went through the webhook too: the derived keys are all there.
    const stored = textData(await read('team-a', 'requested-aws'));
    assert.equal(stored.roleARN, ROLE_ARN);
    assert.equal(stored.workloadIdentityTokenFile, TOKEN_PATH);
  });

  test('issues for a granted ServiceAccount in another namespace, with the GCP provider audience', async () => {
    await create(labelledSecret('gcp', { name: 'requested-gcp', serviceAccount: 'team-b/shared' }));
    const token = await tokenOf('team-a', 'requested-gcp');
    await verifyServiceAccountToken(cp, token, { audience: GCP_AUDIENCE, namespace: 'team-b', name: 'shared' });
  });

  test('renews at once when the renew annotation is set, and removes the annotation', async () => {
    await create(labelledSecret('azure', { name: 'forced' }));
    const first = await tokenOf('team-a', 'forced');
    await core.patchNamespacedSecret({
      namespace: 'team-a',
      name: 'forced',
      body: [{ op: 'add', path: `/metadata/annotations/${RENEW.replace('/', '~1')}`, value: new Date().toISOString() }],
    });
    const second = await tokenOf('team-a', 'forced', first);
    await verifyServiceAccountToken(cp, second, {
      audience: 'api://AzureADTokenExchange',
      namespace: 'team-a',
      name: 'app',
    });
    const stored = await until('the annotation to be removed', async () => {
      const s = await read('team-a', 'forced');
      return s.metadata?.annotations?.[RENEW] === undefined ? s : undefined;
    });
    assert.equal(textData(stored).clientID, CLIENT);
  });

  test('replaces a token past half its lifetime', async () => {
    await create(labelledSecret('aws', { name: 'stale' }));
    await tokenOf('team-a', 'stale');
    const now = Math.floor(Date.now() / 1000);
    // Issued 400 s ago for 600 s: due for renewal since about 100 s.
    const stale = fakeJwt({
      sub: 'system:serviceaccount:team-a:app',
      aud: ['sts.amazonaws.com'],
      iat: now - 400,
      exp: now + 200,
    });
    await core.patchNamespacedSecret({
      namespace: 'team-a',
      name: 'stale',
      body: [{ op: 'replace', path: '/data/token', value: b64(stale) }],
    });
    const renewed = await tokenOf('team-a', 'stale', stale);
    const claims = await verifyServiceAccountToken(cp, renewed, {
      audience: 'sts.amazonaws.com',
      namespace: 'team-a',
      name: 'app',
    });
    assert.ok(claims.iat! >= now - 5);
  });

  test('gives no token to a Secret whose grant was withdrawn, and says why in an event', async () => {
    const event = await until(
      'a TokenRefused event',
      async () => {
        const events = await core.listNamespacedEvent({
          namespace: 'team-a',
          fieldSelector: 'involvedObject.name=withdrawn',
        });
        return events.items.find((e) => e.reason === 'TokenRefused');
      },
      30_000,
    );
    assert.equal(event.type, 'Warning');
    assert.match(
      event.message!,
      /^no token issued: annotation workload-identity-webhook\.io\/service-account references ServiceAccount team-b\/withdrawn in another namespace, which has not granted references from namespace team-a/,
    );
    assert.equal((await read('team-a', 'withdrawn')).data?.token, undefined);
    assert.match(await r1.metrics(), /^wiw_token_requestor_refusals_total\{reason="ReferenceNotGranted"\} [1-9]/m);
  });

  test('one instance writes at a time; a standby takes over when the leader stops', async () => {
    r2 = await startTokenRequestor(cp, kubeconfig, args);
    assert.equal(await leaseHolder(cp, SYSTEM, LEASE), r1.identity);
    assert.match(await r2.metrics(), /^wiw_token_requestor_leader 0$/m);
    await create(labelledSecret('aws', { name: 'failover' }));
    const first = await tokenOf('team-a', 'failover');
    await r1.stop(); // SIGTERM: releases the Lease
    await until(
      'the standby to take the Lease',
      async () => (await leaseHolder(cp, SYSTEM, LEASE)) === r2!.identity || undefined,
    );
    await until(
      'the standby to lead',
      async () => /^wiw_token_requestor_leader 1$/m.test(await r2!.metrics()) || undefined,
    );
    await core.patchNamespacedSecret({
      namespace: 'team-a',
      name: 'failover',
      body: [{ op: 'add', path: `/metadata/annotations/${RENEW.replace('/', '~1')}`, value: 'now' }],
    });
    const second = await tokenOf('team-a', 'failover', first);
    await verifyServiceAccountToken(cp, second, { audience: 'sts.amazonaws.com', namespace: 'team-a', name: 'app' });
    // The line reaches the log file after the write the test saw: wait for it, not just look.
    await until(
      'the token written line',
      () => r2!.logs().some((l) => l.msg === 'token written' && l.secret === 'team-a/failover') || undefined,
    );
  });

  test('a leader that dies without releasing the Lease is replaced once the Lease expires', async () => {
    r3 = await startTokenRequestor(cp, kubeconfig, args);
    assert.equal(await leaseHolder(cp, SYSTEM, LEASE), r2!.identity);
    const first = await tokenOf('team-a', 'failover');
    process.kill(r2!.process.pid, 'SIGKILL');
    await r2!.process.exited;
    await until(
      'the standby to take the expired Lease',
      async () => (await leaseHolder(cp, SYSTEM, LEASE)) === r3!.identity || undefined,
    );
    await core.patchNamespacedSecret({
      namespace: 'team-a',
      name: 'failover',
      body: [{ op: 'add', path: `/metadata/annotations/${RENEW.replace('/', '~1')}`, value: 'again' }],
    });
    const second = await tokenOf('team-a', 'failover', first);
    await verifyServiceAccountToken(cp, second, { audience: 'sts.amazonaws.com', namespace: 'team-a', name: 'app' });
    // The line reaches the log file after the write the test saw: wait for it, not just look.
    await until(
      'the token written line',
      () => r3!.logs().some((l) => l.msg === 'token written' && l.secret === 'team-a/failover') || undefined,
    );
  });

  test('the documented examples work as written: Secret, token, and the Pod mounting it', async () => {
    const audiences: Record<string, [string, string]> = {
      aws: ['sts.amazonaws.com', 'backup'],
      azure: ['api://AzureADTokenExchange', 'dns'],
      gcp: [
        '//iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/on-prem/providers/cluster-a',
        'certs',
      ],
    };
    for (const [provider, [audience, serviceAccount]] of Object.entries(audiences)) {
      for (const file of [`${provider}.yaml`, `${provider}-pod.yaml`]) {
        const text = readFileSync(resolve(import.meta.dirname, '../../examples/secrets', file), 'utf8');
        for (const doc of parseAllDocuments(text).map((d) => d.toJS())) {
          if (doc.kind === 'ServiceAccount')
            await core.createNamespacedServiceAccount({ namespace: 'apps', body: doc as V1ServiceAccount });
          else if (doc.kind === 'Secret')
            await core.createNamespacedSecret({ namespace: 'apps', body: doc as V1Secret });
          else await core.createNamespacedPod({ namespace: 'apps', body: doc as V1Pod });
        }
      }
      const secretName = `${serviceAccount}-${provider}`;
      const token = await tokenOf('apps', secretName);
      await verifyServiceAccountToken(cp, token, { audience, namespace: 'apps', name: serviceAccount });
      const keys = Object.keys((await read('apps', secretName)).data!).sort();
      const expected = {
        aws: ['credentialsFile', 'roleARN', 'workloadIdentityTokenFile'],
        azure: ['azure.env', 'clientID', 'subscriptionID', 'tenantID', 'workloadIdentityTokenFile'],
        gcp: ['credentialsConfig', 'projectID'],
      }[provider]!;
      assert.deepEqual(keys, ['config', ...expected, 'token'].sort());
      const pod = await core.readNamespacedPod({ namespace: 'apps', name: secretName });
      assert.equal(pod.spec!.volumes![0].secret!.secretName, secretName);
    }
  });

  test('warns only about the refused Secret, and never logs a token', () => {
    const requestorLogs = [...r1.logs(), ...(r2?.logs() ?? []), ...(r3?.logs() ?? [])];
    const warnings = requestorLogs.filter((l) => (l.level as number) >= 40);
    assert.ok(warnings.length > 0);
    assert.deepEqual(
      [...new Set(warnings.map((l) => `${l.secret}: ${l.msg}`))],
      ['team-a/withdrawn: no token: the webhook would refuse this Secret'],
    );
    for (const line of [...requestorLogs, ...wh.logs()]) {
      assert.doesNotMatch(JSON.stringify(line), /eyJ[A-Za-z0-9_-]{10,}\.eyJ/);
    }
  });
});
