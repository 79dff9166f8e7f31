// IRSA as the core renders it: the web identity pair, the token volume, region and regional STS,
// expiry, and the values the AWS peer reads its own way (a warning, or a refusal under --strict).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { apply, envOf, pod } from '../support/builders.ts';
import { containerEnv } from '../support/kubelet-expansion.ts';
import { ROLE_ARN as AWS_ARN } from '../support/identities.ts';
import { denied, mutated, run } from '../support/mutate-pod.ts';

describe('AWS (IAM Roles for Service Accounts)', () => {
  test('injects the token volume, read-only mount and web-identity env vars with the peer defaults', () => {
    const out = mutated(pod(), { 'eks.amazonaws.com/role-arn': AWS_ARN });
    assert.deepEqual(out.spec!.volumes, [
      {
        name: 'aws-iam-token',
        projected: {
          sources: [
            { serviceAccountToken: { audience: 'sts.amazonaws.com', expirationSeconds: 86400, path: 'token' } },
          ],
        },
      },
    ]);
    const c = out.spec!.containers![0];
    assert.deepEqual(c.volumeMounts, [
      { name: 'aws-iam-token', mountPath: '/var/run/secrets/eks.amazonaws.com/serviceaccount', readOnly: true },
    ]);
    assert.deepEqual(c.env, [
      { name: 'AWS_ROLE_ARN', value: AWS_ARN },
      { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: '/var/run/secrets/eks.amazonaws.com/serviceaccount/token' },
    ]);
  });

  test('audience, regional STS and region come from the ServiceAccount and flags', () => {
    const out = mutated(
      pod(),
      {
        'eks.amazonaws.com/role-arn': AWS_ARN,
        'eks.amazonaws.com/audience': 'my-audience',
        'eks.amazonaws.com/sts-regional-endpoints': 'true',
      },
      { 'aws-default-region': 'eu-west-1' },
    );
    const env = envOf(out.spec!.containers![0]);
    assert.equal(env.AWS_STS_REGIONAL_ENDPOINTS, 'regional');
    assert.equal(env.AWS_REGION, 'eu-west-1');
    assert.equal(env.AWS_DEFAULT_REGION, 'eu-west-1');
    assert.equal(out.spec!.volumes![0].projected!.sources![0].serviceAccountToken!.audience, 'my-audience');
  });

  test('the Pod token-expiration wins over the ServiceAccount and values below 600 are raised to 600', () => {
    const annotations = { 'eks.amazonaws.com/role-arn': AWS_ARN, 'eks.amazonaws.com/token-expiration': '7200' };
    const fromSa = mutated(pod(), annotations);
    assert.equal(fromSa.spec!.volumes![0].projected!.sources![0].serviceAccountToken!.expirationSeconds, 7200);
    const fromPod = mutated(pod({ annotations: { 'eks.amazonaws.com/token-expiration': '100' } }), annotations);
    assert.equal(fromPod.spec!.volumes![0].projected!.sources![0].serviceAccountToken!.expirationSeconds, 600);
  });

  test('a region is added only when the container sets neither AWS_REGION nor AWS_DEFAULT_REGION', () => {
    const p = pod({
      spec: { containers: [{ name: 'app', env: [{ name: 'AWS_DEFAULT_REGION', value: 'us-east-2' }] }] },
    });
    const env = envOf(
      mutated(p, { 'eks.amazonaws.com/role-arn': AWS_ARN }, { 'aws-default-region': 'eu-west-1' }).spec!.containers![0],
    );
    assert.equal(env.AWS_DEFAULT_REGION, 'us-east-2');
    assert.equal('AWS_REGION' in env, false);
  });

  test('a malformed role ARN is injected as written with a warning, as the peer does; --strict denies it', () => {
    const bad = 'arn:aws:iam::12345:role/x';
    const r = run(pod(), { 'eks.amazonaws.com/role-arn': bad });
    assert.ok(r.allowed);
    assert.deepEqual(r.warnings, [
      `ServiceAccount team-a/app annotation eks.amazonaws.com/role-arn="${bad}" is not an IAM role ARN; expected arn:<partition>:iam::<12-digit account>:role/<optional path/><name>; injecting it as written, as the peer webhook does (--strict refuses it)`,
    ]);
    assert.equal(envOf(apply(pod(), r.patch).spec!.containers![0]).AWS_ROLE_ARN, bad);
    // Tenant policy cannot place it in an account.
    assert.deepEqual(r.injections[0].identity, {
      roleArn: bad,
      account: '',
      partition: '',
      audience: 'sts.amazonaws.com',
    });
    const d = denied(pod(), { 'eks.amazonaws.com/role-arn': bad }, { strict: 'true' });
    assert.equal(d.reason, 'InvalidRoleArn');
    assert.match(d.message, /ServiceAccount team-a\/app annotation eks\.amazonaws\.com\/role-arn/);
    assert.match(d.message, /12-digit account/);
  });

  test('a role ARN injected as written reaches the container as written: the kubelet expands no $(NAME) in it', () => {
    const written = 'arn:aws:iam::111122223333:role/$(AWS_WEB_IDENTITY_TOKEN_FILE)$$';
    const c = mutated(pod(), { 'eks.amazonaws.com/role-arn': written }).spec!.containers![0];
    assert.equal(containerEnv(c).get('AWS_ROLE_ARN'), written);
  });

  test('a token-expiration the peer cannot read falls back as in the peer, with a warning; --strict refuses it', () => {
    const p = pod({ annotations: { 'eks.amazonaws.com/token-expiration': '1h' } });
    const result = run(p, { 'eks.amazonaws.com/role-arn': AWS_ARN, 'eks.amazonaws.com/token-expiration': '7200' });
    assert.equal(result.allowed, true);
    const out = apply(p, result.allowed ? result.patch : []);
    // The Pod's unreadable value gives way to the ServiceAccount's, as the peer's parsePodAnnotations does.
    assert.equal(out.spec!.volumes![0].projected!.sources![0].serviceAccountToken!.expirationSeconds, 7200);
    assert.deepEqual(result.allowed && result.warnings, [
      'Pod annotation eks.amazonaws.com/token-expiration="1h" is not a whole number of seconds (for example "3600"); using 7200, as the peer webhook does (--strict refuses it)',
    ]);
    const d = denied(p, { 'eks.amazonaws.com/role-arn': AWS_ARN }, { strict: 'true' });
    assert.match(d.message, /eks\.amazonaws\.com\/token-expiration="1h" is not a whole number of seconds/);
  });

  test('an sts-regional-endpoints value the peer cannot read keeps the default, with a warning; --strict refuses it', () => {
    const annotations = { 'eks.amazonaws.com/role-arn': AWS_ARN, 'eks.amazonaws.com/sts-regional-endpoints': 'yes' };
    const result = run(pod(), annotations, { 'aws-sts-regional-endpoints': 'true' });
    assert.equal(result.allowed, true);
    assert.equal(
      envOf(apply(pod(), result.allowed ? result.patch : []).spec!.containers![0]).AWS_STS_REGIONAL_ENDPOINTS,
      'regional',
    );
    assert.deepEqual(result.allowed && result.warnings, [
      'ServiceAccount team-a/app annotation eks.amazonaws.com/sts-regional-endpoints="yes" must be "true" or "false"; using true, as the peer webhook does (--strict refuses it)',
    ]);
    const d = denied(pod(), annotations, { strict: 'true' });
    assert.match(d.message, /sts-regional-endpoints="yes" must be "true" or "false"/);
  });

  test('a container that sets either web-identity variable gets neither: the pair travels together', () => {
    const p = pod({
      spec: { containers: [{ name: 'app', env: [{ name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: '/mine/token' }] }] },
    });
    const env = envOf(mutated(p, { 'eks.amazonaws.com/role-arn': AWS_ARN }).spec!.containers![0]);
    assert.equal(env.AWS_ROLE_ARN, undefined);
    assert.equal(env.AWS_WEB_IDENTITY_TOKEN_FILE, '/mine/token');
  });

  test('a Pod selecting Windows nodes by the beta label gets Windows paths', () => {
    const p = pod({ spec: { containers: [{ name: 'app' }], nodeSelector: { 'beta.kubernetes.io/os': 'windows' } } });
    const env = envOf(mutated(p, { 'eks.amazonaws.com/role-arn': AWS_ARN }).spec!.containers![0]);
    assert.equal(env.AWS_WEB_IDENTITY_TOKEN_FILE, 'C:\\var\\run\\secrets\\eks.amazonaws.com\\serviceaccount\\token');
  });

  test('the skip label opts the Pod out and skip-containers leaves named containers alone', () => {
    const skipped = run(pod({ labels: { 'eks.amazonaws.com/skip-pod-identity-webhook': '' } }), {
      'eks.amazonaws.com/role-arn': AWS_ARN,
    });
    assert.deepEqual(skipped.allowed && skipped.patch, []);
    const p = pod({
      annotations: { 'eks.amazonaws.com/skip-containers': 'sidecar, init' },
      spec: { initContainers: [{ name: 'init' }], containers: [{ name: 'app' }, { name: 'sidecar' }] },
    });
    const out = mutated(p, { 'eks.amazonaws.com/role-arn': AWS_ARN });
    assert.equal(out.spec!.initContainers![0].env, undefined);
    assert.equal(out.spec!.containers![1].env, undefined);
    assert.equal(envOf(out.spec!.containers![0]).AWS_ROLE_ARN, AWS_ARN);
  });

  test('Windows Pods get the token path as a Windows path', () => {
    const p = pod({ spec: { nodeSelector: { 'kubernetes.io/os': 'windows' } } });
    const env = envOf(mutated(p, { 'eks.amazonaws.com/role-arn': AWS_ARN }).spec!.containers![0]);
    assert.equal(env.AWS_WEB_IDENTITY_TOKEN_FILE, 'C:\\var\\run\\secrets\\eks.amazonaws.com\\serviceaccount\\token');
  });

  test('a custom annotation prefix is honoured', () => {
    const out = mutated(pod(), { 'iam.example.com/role-arn': AWS_ARN }, { 'aws-annotation-prefix': 'iam.example.com' });
    assert.equal(envOf(out.spec!.containers![0]).AWS_ROLE_ARN, AWS_ARN);
  });

  test('GovCloud and China partitions are accepted', () => {
    for (const arn of ['arn:aws-us-gov:iam::111122223333:role/a', 'arn:aws-cn:iam::111122223333:role/path/to/b']) {
      assert.equal(envOf(mutated(pod(), { 'eks.amazonaws.com/role-arn': arn }).spec!.containers![0]).AWS_ROLE_ARN, arn);
    }
  });
});
