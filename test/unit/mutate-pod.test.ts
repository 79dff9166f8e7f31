import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mutatePod } from '../../src/mutate/pod.ts';
import type { Pod } from '../../src/kube/types.ts';
import { apply, config, envOf, pod, providers, sa } from '../support/builders.ts';
import { AWS_CREDENTIAL_ENV } from '../../src/clouds/aws/conventions.ts';
import { AZURE_CREDENTIAL_ENV } from '../../src/clouds/azure/pod.ts';
import { GCP_CREDENTIAL_ENV } from '../../src/clouds/gcp/conventions.ts';
import { PFNET_SETUP_SCRIPT } from '../../src/clouds/gcp/gcloud-setup.ts';
import { ConfigError } from '../../src/errors.ts';
import { KUBELET_HOSTILE } from '../support/hostile.ts';
import { containerEnv } from '../support/kubelet-expansion.ts';
import {
  CLIENT as AZ_CLIENT,
  GCP_EMAIL,
  ROLE_ARN as AWS_ARN,
  TENANT as AZ_TENANT,
  WIF_PROVIDER as GCP_PROVIDER,
} from '../support/identities.ts';

function run(p: Pod, annotations: Record<string, string> | undefined, flags: Record<string, string> = {}) {
  return mutatePod(providers(flags), {
    pod: p,
    namespace: 'team-a',
    serviceAccount: annotations ? sa(annotations) : undefined,
  });
}

function mutated(p: Pod, annotations: Record<string, string> | undefined, flags: Record<string, string> = {}): Pod {
  const result = run(p, annotations, flags);
  assert.equal(result.allowed, true, result.allowed ? '' : result.denial.message);
  return apply(p, result.allowed ? result.patch : []);
}

function denied(p: Pod, annotations: Record<string, string> | undefined, flags: Record<string, string> = {}) {
  const result = run(p, annotations, flags);
  assert.equal(result.allowed, false, 'expected a denial');
  return result.allowed ? assert.fail() : result.denial;
}

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

describe('Azure (Microsoft Entra Workload ID)', () => {
  const annotations = {
    'azure.workload.identity/client-id': AZ_CLIENT,
    'azure.workload.identity/tenant-id': AZ_TENANT,
  };
  const optedIn = (extra: Parameters<typeof pod>[0] = {}) =>
    pod({ ...extra, labels: { 'azure.workload.identity/use': 'true', ...extra.labels } });

  test('injects only when the Pod opts in with the exact label value "true"', () => {
    for (const labels of [undefined, { 'azure.workload.identity/use': 'True' }]) {
      const r = run(pod({ labels }), annotations);
      assert.deepEqual(r.allowed && r.patch, []);
    }
    const out = mutated(optedIn(), annotations);
    assert.deepEqual(out.spec!.containers![0].env, [
      { name: 'AZURE_CLIENT_ID', value: AZ_CLIENT },
      { name: 'AZURE_TENANT_ID', value: AZ_TENANT },
      { name: 'AZURE_FEDERATED_TOKEN_FILE', value: '/var/run/secrets/azure/tokens/azure-identity-token' },
      { name: 'AZURE_AUTHORITY_HOST', value: 'https://login.microsoftonline.com/' },
    ]);
    assert.deepEqual(out.spec!.volumes, [
      {
        name: 'azure-identity-token',
        projected: {
          sources: [
            {
              serviceAccountToken: {
                audience: 'api://AzureADTokenExchange',
                expirationSeconds: 3600,
                path: 'azure-identity-token',
              },
            },
          ],
        },
      },
    ]);
    // One token, where the peer's releases 0.8-1.5 and 1.6+ each put it.
    assert.deepEqual(out.spec!.containers![0].volumeMounts, [
      { name: 'azure-identity-token', mountPath: '/var/run/secrets/azure/tokens', readOnly: true },
      { name: 'azure-identity-token', mountPath: '/var/run/secrets/azure/wi/token', readOnly: true },
    ]);
  });

  test('inject-proxy-sidecar: any value asks for the proxy, as in the peer; a value other than "true" says so', () => {
    const p = optedIn({ annotations: { 'azure.workload.identity/inject-proxy-sidecar': 'false' } });
    const result = run(p, annotations);
    assert.ok(result.allowed);
    const out = apply(p, result.patch);
    assert.deepEqual(
      out.spec!.initContainers!.map((c) => c.name),
      ['azwi-proxy', 'azwi-proxy-init'],
    );
    assert.deepEqual(result.warnings, [
      'Pod annotation azure.workload.identity/inject-proxy-sidecar="false" injects the proxy sidecar: the peer webhook injects it whenever the annotation is present, whatever its value; remove the annotation to go without',
    ]);
  });

  test('proxy-sidecar-port: whole numbers 1..65535 (a leading + as Go reads it); anything else is refused with the expected form', () => {
    const withPort = (port: string) =>
      optedIn({
        annotations: {
          'azure.workload.identity/inject-proxy-sidecar': 'true',
          'azure.workload.identity/proxy-sidecar-port': port,
        },
      });
    const init = mutated(withPort('+8080'), annotations).spec!.initContainers!;
    assert.deepEqual(init[0].args, ['--proxy-port=8080', '--log-level=info']);
    assert.deepEqual(envOf(init[1]).PROXY_PORT, '8080');
    for (const port of ['0', '65536', '-1', '80.5', '', 'http']) {
      const d = denied(withPort(port), annotations);
      assert.equal(d.reason, 'InvalidProxyPort');
      assert.equal(
        d.message,
        `Pod annotation azure.workload.identity/proxy-sidecar-port="${port}" is not a port; expected a whole number from 1 to 65535 (default 8000)`,
      );
    }
  });

  test("the proxy without native sidecars: azwi-proxy is the first container, with the flags' images and log level", () => {
    const p = optedIn({ annotations: { 'azure.workload.identity/inject-proxy-sidecar': 'true' } });
    const out = mutated(p, annotations, {
      'azure-proxy-native-sidecar': 'false',
      'azure-proxy-image': 'registry.example/proxy:2',
      'azure-proxy-init-image': 'registry.example/proxy-init:2',
      'azure-proxy-log-level': 'debug',
    });
    const [proxy, app] = out.spec!.containers!;
    assert.equal(app.name, 'app');
    assert.equal(proxy.name, 'azwi-proxy');
    assert.equal(proxy.image, 'registry.example/proxy:2');
    assert.equal(proxy.restartPolicy, undefined);
    assert.deepEqual(proxy.args, ['--proxy-port=8000', '--log-level=debug']);
    assert.deepEqual(
      out.spec!.initContainers!.map((c) => [c.name, c.image]),
      [['azwi-proxy-init', 'registry.example/proxy-init:2']],
    );
  });

  test("the proxy images pinned by digest are the containers' images, exactly", () => {
    const p = optedIn({ annotations: { 'azure.workload.identity/inject-proxy-sidecar': 'true' } });
    const digest = `@sha256:${'ef'.repeat(32)}`;
    const out = mutated(p, annotations, {
      'azure-proxy-image': `mcr.microsoft.com/oss/azure/workload-identity/proxy:v1.6.0${digest}`,
      'azure-proxy-init-image': `mcr.microsoft.com/oss/azure/workload-identity/proxy-init:v1.6.0${digest}`,
    });
    const all = [...out.spec!.initContainers!, ...out.spec!.containers!];
    assert.equal(
      all.find((c) => c.name === 'azwi-proxy')!.image,
      `mcr.microsoft.com/oss/azure/workload-identity/proxy:v1.6.0${digest}`,
    );
    assert.equal(
      all.find((c) => c.name === 'azwi-proxy-init')!.image,
      `mcr.microsoft.com/oss/azure/workload-identity/proxy-init:v1.6.0${digest}`,
    );
  });

  test('an empty service-account-token-expiration is ignored as in the peer, with a warning; --strict refuses it', () => {
    const p = optedIn({ annotations: { 'azure.workload.identity/service-account-token-expiration': '' } });
    const result = run(p, { ...annotations, 'azure.workload.identity/service-account-token-expiration': '7200' });
    assert.equal(result.allowed, true);
    const out = apply(p, result.allowed ? result.patch : []);
    assert.equal(out.spec!.volumes![0].projected!.sources![0].serviceAccountToken!.expirationSeconds, 7200);
    assert.deepEqual(result.allowed && result.warnings, [
      'Pod annotation azure.workload.identity/service-account-token-expiration="" is empty; expected whole seconds from 3600 to 86400, or no annotation; ignoring it, as the peer webhook does (--strict refuses it)',
    ]);
    const d = denied(p, annotations, { strict: 'true' });
    assert.equal(d.reason, 'InvalidTokenExpiration');
  });

  test('every environment the peer knows by name sets its authority host, the name in any case', () => {
    for (const [cloud, host] of [
      ['AzureGermanCloud', 'https://login.microsoftonline.de/'],
      ['azureusgovernmentcloud', 'https://login.microsoftonline.us/'],
    ]) {
      const out = mutated(optedIn(), annotations, { 'azure-cloud': cloud });
      assert.equal(envOf(out.spec!.containers![0]).AZURE_AUTHORITY_HOST, host);
    }
  });

  test('the tenant defaults to --azure-tenant-id and the authority host follows --azure-cloud', () => {
    const out = mutated(
      optedIn(),
      { 'azure.workload.identity/client-id': AZ_CLIENT },
      { 'azure-tenant-id': AZ_TENANT, 'azure-cloud': 'AzureChinaCloud' },
    );
    const env = envOf(out.spec!.containers![0]);
    assert.equal(env.AZURE_TENANT_ID, AZ_TENANT);
    assert.equal(env.AZURE_AUTHORITY_HOST, 'https://login.chinacloudapi.cn/');
  });

  test('empty values are never injected, and the client is told why', () => {
    const r = run(optedIn(), {});
    assert.ok(r.allowed);
    const env = envOf(apply(optedIn(), r.patch).spec!.containers![0]);
    assert.equal('AZURE_CLIENT_ID' in env, false);
    assert.equal('AZURE_TENANT_ID' in env, false);
    assert.ok(r.warnings.some((w) => /AZURE_CLIENT_ID is not injected/.test(w)));
  });

  test('a Pod whose ServiceAccount does not exist is admitted, not denied', () => {
    const r = run(optedIn(), undefined, { 'azure-tenant-id': AZ_TENANT });
    assert.ok(r.allowed);
    assert.equal(envOf(apply(optedIn(), r.patch).spec!.containers![0]).AZURE_TENANT_ID, AZ_TENANT);
  });

  test('token expiry: the Pod wins, and a value outside 3600..86400 denies with the bounds', () => {
    const out = mutated(
      optedIn({ annotations: { 'azure.workload.identity/service-account-token-expiration': '7200' } }),
      {
        ...annotations,
        'azure.workload.identity/service-account-token-expiration': '5000',
      },
    );
    assert.equal(out.spec!.volumes![0].projected!.sources![0].serviceAccountToken!.expirationSeconds, 7200);
    const d = denied(optedIn(), { ...annotations, 'azure.workload.identity/service-account-token-expiration': '600' });
    assert.match(d.message, /service-account-token-expiration=600 is out of range; expected 3600 to 86400 seconds/);
  });

  test('skip-containers is ";"-separated', () => {
    const p = optedIn({
      annotations: { 'azure.workload.identity/skip-containers': 'a;b' },
      spec: { containers: [{ name: 'a' }, { name: 'b' }, { name: 'c' }] },
    });
    const out = mutated(p, annotations);
    assert.deepEqual(
      out.spec!.containers!.map((c) => Boolean(c.env)),
      [false, false, true],
    );
  });

  test('a client id that is not a GUID is injected as the peer injects it, with a warning naming the expected form; --strict refuses it', () => {
    const result = run(optedIn(), { 'azure.workload.identity/client-id': 'my-app' }, { 'azure-tenant-id': AZ_TENANT });
    assert.equal(result.allowed, true);
    assert.equal(
      envOf(apply(optedIn(), result.allowed ? result.patch : []).spec!.containers![0]).AZURE_CLIENT_ID,
      'my-app',
    );
    assert.match(
      (result.allowed && result.warnings.join('\n')) || '',
      /client-id="my-app" is not a client id; expected a GUID .*; injecting it as written/,
    );
    const d = denied(optedIn(), { 'azure.workload.identity/client-id': 'my-app' }, { strict: 'true' });
    assert.match(d.message, /client-id="my-app" is not a client id; expected a GUID/);
  });

  test('a client or tenant id injected as written reaches the container as written: the kubelet expands no $(NAME) in it', () => {
    const written = {
      'azure.workload.identity/client-id': '$(AZURE_FEDERATED_TOKEN_FILE)',
      'azure.workload.identity/tenant-id': 'x$$(HOME)',
    };
    const c = mutated(optedIn(), written).spec!.containers![0];
    const env = containerEnv(c);
    assert.equal(env.get('AZURE_CLIENT_ID'), written['azure.workload.identity/client-id']);
    assert.equal(env.get('AZURE_TENANT_ID'), written['azure.workload.identity/tenant-id']);
  });
});

describe('GCP (Workload Identity Federation)', () => {
  function credentials(out: Pod) {
    return JSON.parse(out.metadata!.annotations!['cloud.google.com/external-credentials-json']);
  }

  test('impersonation: the external_account file gcloud writes, projected next to the token', () => {
    const out = mutated(pod(), {
      'gcp.auth.fluxcd.io/workload-identity-provider': GCP_PROVIDER,
      'iam.gke.io/gcp-service-account': GCP_EMAIL,
    });
    assert.deepEqual(Object.keys(credentials(out)), [
      'universe_domain',
      'type',
      'audience',
      'subject_token_type',
      'token_url',
      'service_account_impersonation_url',
      'credential_source',
    ]);
    assert.deepEqual(credentials(out), {
      universe_domain: 'googleapis.com',
      type: 'external_account',
      audience: `//iam.googleapis.com/${GCP_PROVIDER}`,
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      token_url: 'https://sts.googleapis.com/v1/token',
      service_account_impersonation_url: `https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${GCP_EMAIL}:generateAccessToken`,
      credential_source: { file: '/var/run/secrets/sts.googleapis.com/serviceaccount/token', format: { type: 'text' } },
    });
    assert.deepEqual(out.spec!.volumes![0], {
      name: 'gcp-iam-token',
      projected: {
        sources: [
          {
            serviceAccountToken: {
              audience: `//iam.googleapis.com/${GCP_PROVIDER}`,
              expirationSeconds: 86400,
              path: 'token',
            },
          },
          {
            downwardAPI: {
              items: [
                {
                  path: 'federation.json',
                  fieldRef: {
                    apiVersion: 'v1',
                    fieldPath: "metadata.annotations['cloud.google.com/external-credentials-json']",
                  },
                },
              ],
            },
          },
        ],
      },
    });
    assert.deepEqual(envOf(out.spec!.containers![0]), {
      GOOGLE_APPLICATION_CREDENTIALS: '/var/run/secrets/sts.googleapis.com/serviceaccount/federation.json',
      CLOUDSDK_CORE_PROJECT: 'my-project',
      GOOGLE_CLOUD_PROJECT: 'my-project',
    });
  });

  test('the Flux dialect without a Google service account means direct resource access', () => {
    const out = mutated(pod(), { 'gcp.auth.fluxcd.io/workload-identity-provider': GCP_PROVIDER });
    const c = credentials(out);
    assert.equal(c.service_account_impersonation_url, undefined);
    assert.equal(c.token_info_url, 'https://sts.googleapis.com/v1/introspect');
    assert.equal('CLOUDSDK_CORE_PROJECT' in envOf(out.spec!.containers![0]), false);
    assert.equal('GOOGLE_CLOUD_PROJECT' in envOf(out.spec!.containers![0]), false);
  });

  test("the Flux dialect impersonates GKE's iam.gke.io/gcp-service-account", () => {
    const out = mutated(pod(), {
      'gcp.auth.fluxcd.io/workload-identity-provider': GCP_PROVIDER,
      'iam.gke.io/gcp-service-account': 'flux@infra-prod.iam.gserviceaccount.com',
    });
    assert.match(
      credentials(out).service_account_impersonation_url,
      /serviceAccounts\/flux@infra-prod\.iam\.gserviceaccount\.com:generateAccessToken$/,
    );
  });

  test('expiry is raised to the 3600 s floor, audience and region are configurable', () => {
    const out = mutated(
      pod({ annotations: { 'cloud.google.com/token-expiration': '700' } }),
      {
        'cloud.google.com/workload-identity-provider': GCP_PROVIDER,
        'cloud.google.com/audience': 'https://iam.googleapis.com/' + GCP_PROVIDER,
      },
      { 'gcp-default-region': 'europe-west4' },
    );
    const token = out.spec!.volumes![0].projected!.sources![0].serviceAccountToken!;
    assert.equal(token.expirationSeconds, 3600);
    assert.equal(token.audience, 'https://iam.googleapis.com/' + GCP_PROVIDER);
    assert.equal(envOf(out.spec!.containers![0]).CLOUDSDK_COMPUTE_REGION, 'europe-west4');
  });

  test('a provider of the wrong form denies with the expected form', () => {
    const d = denied(pod(), { 'cloud.google.com/workload-identity-provider': 'projects/my-project/providers/x' });
    assert.equal(d.reason, 'InvalidWorkloadIdentityProvider');
    assert.match(
      d.message,
      /expected projects\/<project number>\/locations\/global\/workloadIdentityPools\/<pool>\/providers\/<provider>/,
    );
  });

  test('the two dialects naming different providers is a conflict, not a guess', () => {
    const d = denied(pod(), {
      'cloud.google.com/workload-identity-provider': GCP_PROVIDER,
      'gcp.auth.fluxcd.io/workload-identity-provider': GCP_PROVIDER.replace('cluster-a', 'cluster-b'),
    });
    assert.match(
      d.message,
      /sets both cloud\.google\.com\/workload-identity-provider=.* and gcp\.auth\.fluxcd\.io\/workload-identity-provider=/,
    );
  });

  test('the Flux dialect with injection-mode gcloud points gcloud at the same file instead of running an init container', () => {
    const out = mutated(pod(), {
      'gcp.auth.fluxcd.io/workload-identity-provider': GCP_PROVIDER,
      'cloud.google.com/injection-mode': 'gcloud',
    });
    assert.equal(out.spec!.initContainers, undefined);
    assert.equal(
      envOf(out.spec!.containers![0]).CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE,
      '/var/run/secrets/sts.googleapis.com/serviceaccount/federation.json',
    );
  });

  const PFNET_SA = {
    'cloud.google.com/workload-identity-provider': GCP_PROVIDER,
    'cloud.google.com/service-account-email': GCP_EMAIL,
  };

  test("the pfnet dialect gets pfnet's defaults: audience sts.googleapis.com, gcloud mode with its setup init container, files mode 0440", () => {
    const p = pod({
      spec: {
        initContainers: [{ name: 'migrate', image: 'busybox' }],
        containers: [{ name: 'app', image: 'busybox' }],
      },
    });
    const out = mutated(p, PFNET_SA);
    assert.deepEqual(out.spec!.volumes, [
      {
        name: 'gcp-iam-token',
        projected: {
          sources: [
            { serviceAccountToken: { audience: 'sts.googleapis.com', expirationSeconds: 86400, path: 'token' } },
          ],
          defaultMode: 0o440,
        },
      },
      { name: 'gcloud-config', emptyDir: {} },
    ]);
    const [setup, migrate] = out.spec!.initContainers!;
    assert.equal(migrate.name, 'migrate', 'the setup container runs first');
    assert.equal(setup.name, 'gcloud-setup');
    assert.equal(setup.image, 'gcr.io/google.com/cloudsdktool/google-cloud-cli:stable');
    assert.deepEqual(setup.command, [
      'sh',
      '-c',
      // Values read from the environment as quoted words; $$ is the kubelet's escape for $.
      'gcloud iam workload-identity-pools create-cred-config \\\n  "$$GCP_WORKLOAD_IDENTITY_PROVIDER" \\\n  --service-account="$$GCP_SERVICE_ACCOUNT" \\\n  --output-file="$$CLOUDSDK_CONFIG"/federation.json \\\n  --credential-source-file=/var/run/secrets/sts.googleapis.com/serviceaccount/token\ngcloud auth login --cred-file="$$CLOUDSDK_CONFIG"/federation.json\n',
    ]);
    assert.deepEqual(envOf(setup), {
      GCP_WORKLOAD_IDENTITY_PROVIDER: GCP_PROVIDER,
      GCP_SERVICE_ACCOUNT: GCP_EMAIL,
      CLOUDSDK_CONFIG: '/var/run/secrets/gcloud/config',
      CLOUDSDK_CORE_PROJECT: 'my-project',
    });
    assert.deepEqual(setup.securityContext, { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    for (const c of [migrate, out.spec!.containers![0]]) {
      assert.deepEqual(c.volumeMounts, [
        { name: 'gcp-iam-token', mountPath: '/var/run/secrets/sts.googleapis.com/serviceaccount', readOnly: true },
        { name: 'gcloud-config', mountPath: '/var/run/secrets/gcloud/config' },
      ]);
      assert.deepEqual(c.env, [
        { name: 'GOOGLE_APPLICATION_CREDENTIALS', value: '/var/run/secrets/gcloud/config/federation.json' },
        { name: 'CLOUDSDK_CONFIG', value: '/var/run/secrets/gcloud/config' },
        // pfnet's -gcp-default-region is empty unless set: it injects the empty value.
        { name: 'CLOUDSDK_COMPUTE_REGION', value: '' },
        { name: 'CLOUDSDK_CORE_PROJECT', value: 'my-project' },
        { name: 'GOOGLE_CLOUD_PROJECT', value: 'my-project' },
      ]);
    }
    assert.equal(out.metadata!.annotations!['cloud.google.com/audience'], 'sts.googleapis.com');
    assert.equal(out.metadata!.annotations!['cloud.google.com/token-expiration'], '86400');
    assert.equal(out.metadata!.annotations!['cloud.google.com/external-credentials-json'], undefined);
  });

  test('pfnet dialect: a --gcp-gcloud-image pinned by digest is the setup container image, exactly', () => {
    const image = `gcr.io/google.com/cloudsdktool/google-cloud-cli:stable@sha256:${'cd'.repeat(32)}`;
    const out = mutated(pod(), PFNET_SA, { 'gcp-gcloud-image': image });
    assert.equal(out.spec!.initContainers![0].image, image);
  });

  test('pfnet dialect: --gcp-gcloud-image, --gcp-file-mode and gcloud-run-as-user shape the setup container and volumes', () => {
    const out = mutated(
      pod(),
      { ...PFNET_SA, 'cloud.google.com/gcloud-run-as-user': '1000' },
      { 'gcp-gcloud-image': 'registry.example/cloud-sdk:512', 'gcp-file-mode': '0400' },
    );
    const setup = out.spec!.initContainers![0];
    assert.equal(setup.image, 'registry.example/cloud-sdk:512');
    assert.deepEqual(setup.securityContext, {
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      runAsUser: 1000,
    });
    assert.equal(out.spec!.volumes![0].projected!.defaultMode, 0o400);
  });

  test('gcloud-run-as-user: 0 to 2147483647 (what the API server stores); above it refused, naming the bound', () => {
    const key = 'cloud.google.com/gcloud-run-as-user';
    const user = (value: string) =>
      (mutated(pod(), { ...PFNET_SA, [key]: value }).spec!.initContainers![0].securityContext as { runAsUser: number })
        .runAsUser;
    assert.equal(user('2147483647'), 2147483647);
    assert.equal(user(' 0 '), 0);
    for (const strict of ['false', 'true'])
      for (const value of ['2147483648', '9999999999'])
        assert.equal(
          denied(pod(), { ...PFNET_SA, [key]: value }, { strict }).message,
          `ServiceAccount team-a/app annotation ${key}="${value}" is out of range; expected a user id from 0 to 2147483647 (the API server refuses a larger runAsUser)`,
        );
    assert.match(denied(pod(), { ...PFNET_SA, [key]: '1e3' }).message, /is not a user id/);
  });

  test("a provider of pfnet's form is passed through outside --strict only within its characters; any other character is refused in every mode", () => {
    const key = 'cloud.google.com/workload-identity-provider';
    // pfnet's own examples: placeholders in braces, upper case and "_": a warning, as the peer admits them.
    const placeholder =
      'projects/{PROJECT_NUMBER}/locations/{LOCATION}/workloadIdentityPools/{POOL_ID}/providers/{PROVIDER_ID}';
    const r = run(pod(), { ...PFNET_SA, [key]: placeholder });
    assert.ok(r.allowed && r.warnings.some((w) => w.includes('passing it through')));
    assert.equal(
      denied(pod(), { ...PFNET_SA, [key]: placeholder }, { strict: 'true' }).reason,
      'InvalidWorkloadIdentityProvider',
    );
    for (const strict of ['false', 'true'])
      for (const bad of KUBELET_HOSTILE)
        for (const value of [
          GCP_PROVIDER.replace('/providers/', `${bad}/providers/`),
          `${GCP_PROVIDER}${bad}`,
          GCP_PROVIDER.replace('projects/', `projects/${bad}`),
        ]) {
          const d = denied(pod(), { ...PFNET_SA, [key]: value }, { strict });
          assert.equal(d.reason, 'InvalidWorkloadIdentityProvider', JSON.stringify(value));
          assert.ok(d.message.startsWith(`ServiceAccount team-a/app annotation ${key}=`), d.message);
        }
    assert.match(
      denied(pod(), { ...PFNET_SA, [key]: `${GCP_PROVIDER}x;id>F;#` }).message,
      /holds a character no workload identity provider holds \(only letters, digits and "-_.:\{\}" between the slashes\), with or without --strict/,
    );
  });

  test('audiences hold only letters, digits and "-._~:/@%+=,": the annotation is refused in every mode, the flag at start-up', () => {
    const key = 'cloud.google.com/audience';
    for (const good of ['sts.googleapis.com', `//iam.googleapis.com/${GCP_PROVIDER}`, 'https://example.com/~team/x'])
      assert.equal(
        mutated(pod(), { ...PFNET_SA, [key]: good }).spec!.volumes![0].projected!.sources![0].serviceAccountToken!
          .audience,
        good,
      );
    // `~root` is within the set: a tilde means something to a shell only at a word's start.
    for (const strict of ['false', 'true'])
      for (const bad of KUBELET_HOSTILE.filter((v) => v !== '~root')) {
        const d = denied(pod(), { ...PFNET_SA, [key]: `sts${bad}` }, { strict });
        assert.ok(d.message.startsWith(`ServiceAccount team-a/app annotation ${key}=`), d.message);
        assert.ok(
          d.message.endsWith(
            'is not an audience: only letters, digits and "-._~:/@%+=," (a URL or a name such as sts.googleapis.com), with or without --strict',
          ),
          d.message,
        );
      }
    assert.throws(
      () => config({ 'gcp-audience': 'sts;id' }),
      (e: unknown) => e instanceof ConfigError && /--gcp-audience="sts;id" is not an audience/.test(e.message),
    );
    assert.throws(
      () => config({ 'gcp-default-region': 'europe-west1;id' }),
      (e: unknown) =>
        e instanceof ConfigError &&
        /--gcp-default-region="europe-west1;id" is not a Google Cloud region \(for example europe-west1\)/.test(
          e.message,
        ),
    );
    assert.equal(config({ 'gcp-default-region': 'asia-northeast1' }).gcpDefaultRegion, 'asia-northeast1');
  });

  test("pfnet's own gcloud-setup already in the Pod (its webhook came first) is kept, not a conflict; another command under that name is", () => {
    const ours = mutated(pod(), PFNET_SA).spec!.initContainers![0];
    const peers = { ...ours, command: ['sh', '-c', PFNET_SETUP_SCRIPT] };
    const r = run(
      pod({ spec: { initContainers: [peers], containers: [{ name: 'app', image: 'busybox' }] } }),
      PFNET_SA,
    );
    assert.ok(r.allowed, r.allowed ? '' : r.denial.message);
    assert.equal(
      r.patch.filter((op) => op.path.startsWith('/spec/initContainers')).length,
      0,
      'no second setup container',
    );
    const other = { ...ours, command: ['sh', '-c', `${PFNET_SETUP_SCRIPT}id\n`] };
    const d = denied(
      pod({ spec: { initContainers: [other], containers: [{ name: 'app', image: 'busybox' }] } }),
      PFNET_SA,
    );
    assert.equal(d.reason, 'Conflict');
  });

  test("pfnet dialect: injection-mode direct (any case) puts the file at pfnet's path in its own volume", () => {
    const out = mutated(pod(), { ...PFNET_SA, 'cloud.google.com/injection-mode': 'Direct' });
    assert.equal(out.spec!.initContainers, undefined);
    assert.deepEqual(out.spec!.volumes![1], {
      name: 'external-credential-config',
      downwardAPI: {
        items: [
          {
            path: 'federation.json',
            fieldRef: {
              apiVersion: 'v1',
              fieldPath: "metadata.annotations['cloud.google.com/external-credentials-json']",
            },
          },
        ],
        defaultMode: 0o440,
      },
    });
    assert.equal(
      envOf(out.spec!.containers![0]).GOOGLE_APPLICATION_CREDENTIALS,
      '/var/run/secrets/workload-identity/federation.json',
    );
    assert.equal(credentials(out).credential_source.file, '/var/run/secrets/sts.googleapis.com/serviceaccount/token');
  });

  test('pfnet dialect: gcloud mode without a Google service account is refused with what is missing', () => {
    const d = denied(pod(), {
      'cloud.google.com/workload-identity-provider': GCP_PROVIDER,
      'cloud.google.com/injection-mode': 'GCLOUD',
    });
    assert.match(d.message, /injection-mode="gcloud" needs cloud\.google\.com\/service-account-email/);
  });

  test('an init container of the setup name that is not ours is a conflict, not taken over', () => {
    const d = denied(
      pod({ spec: { initContainers: [{ name: 'gcloud-setup', image: 'busybox' }], containers: [{ name: 'app' }] } }),
      PFNET_SA,
    );
    assert.equal(d.reason, 'Conflict');
    assert.match(d.message, /init container named "gcloud-setup"/);
  });

  test("Windows Pods: the Flux dialect's credential file names the Windows path, pfnet's keeps pfnet's Linux paths", () => {
    const windows = pod({ spec: { os: { name: 'windows' } } });
    const flux = mutated(windows, { 'gcp.auth.fluxcd.io/workload-identity-provider': GCP_PROVIDER });
    assert.equal(
      credentials(flux).credential_source.file,
      'C:\\var\\run\\secrets\\sts.googleapis.com\\serviceaccount\\token',
    );
    const pfnet = mutated(windows, { 'cloud.google.com/workload-identity-provider': GCP_PROVIDER });
    assert.equal(credentials(pfnet).credential_source.file, '/var/run/secrets/sts.googleapis.com/serviceaccount/token');
    assert.equal(
      envOf(pfnet.spec!.containers![0]).GOOGLE_APPLICATION_CREDENTIALS,
      '/var/run/secrets/workload-identity/federation.json',
    );
  });

  test('pfnet dialect: an email that is not NAME@PROJECT.iam.gserviceaccount.com gets CLOUDSDK_CORE_PROJECT="" (and no GOOGLE_CLOUD_PROJECT), as pfnet writes it', () => {
    const out = mutated(pod(), {
      ...PFNET_SA,
      'cloud.google.com/service-account-email': 'app-x@project.iam.googleapis.com',
    });
    const [setup, app] = [out.spec!.initContainers![0], out.spec!.containers![0]];
    assert.equal(envOf(setup).CLOUDSDK_CORE_PROJECT, '');
    assert.equal(envOf(app).CLOUDSDK_CORE_PROJECT, '');
    assert.equal(envOf(app).GOOGLE_CLOUD_PROJECT, undefined);
    // pfnet's unanchored expression: the first "@X.iam.gserviceaccount.com" names the project.
    const odd = mutated(pod(), {
      ...PFNET_SA,
      'cloud.google.com/service-account-email': 'a@b.iam.gserviceaccount.com.example',
    });
    assert.equal(envOf(odd.spec!.containers![0]).CLOUDSDK_CORE_PROJECT, 'b');
  });

  test('GOOGLE_CLOUD_PROJECT is left out where the container names its own CLOUDSDK_CORE_PROJECT', () => {
    const out = mutated(
      pod({
        spec: {
          containers: [{ name: 'app', image: 'busybox', env: [{ name: 'CLOUDSDK_CORE_PROJECT', value: 'other' }] }],
        },
      }),
      PFNET_SA,
    );
    const env = envOf(out.spec!.containers![0]);
    assert.equal(env.CLOUDSDK_CORE_PROJECT, 'other');
    assert.equal(env.GOOGLE_CLOUD_PROJECT, undefined);
  });

  test("--gcp-default-injection-mode direct: pfnet main's default, for ServiceAccounts that name no mode", () => {
    const out = mutated(pod(), PFNET_SA, { 'gcp-default-injection-mode': 'direct' });
    assert.equal(out.spec!.initContainers, undefined, 'no setup container');
    assert.ok(out.metadata!.annotations!['cloud.google.com/external-credentials-json']);
    const gcloud = mutated(
      pod(),
      { ...PFNET_SA, 'cloud.google.com/injection-mode': 'gcloud' },
      {
        'gcp-default-injection-mode': 'direct',
      },
    );
    assert.equal(gcloud.spec!.initContainers![0].name, 'gcloud-setup', "the ServiceAccount's own mode wins");
  });

  test("--gcp-direct-gcloud: direct mode also sets up gcloud (pfnet main, #152); off, direct mode is v0.7.0's", () => {
    const sa = { ...PFNET_SA, 'cloud.google.com/injection-mode': 'direct' };
    const plain = envOf(mutated(pod(), sa).spec!.containers![0]);
    assert.equal(plain.CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE, undefined);
    assert.equal(plain.CLOUDSDK_CONFIG, undefined);
    const out = mutated(pod(), sa, { 'gcp-direct-gcloud': 'true' });
    const app = out.spec!.containers![0];
    assert.equal(
      envOf(app).CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE,
      '/var/run/secrets/workload-identity/federation.json',
    );
    assert.equal(envOf(app).CLOUDSDK_CONFIG, '/var/run/secrets/gcloud/config');
    assert.deepEqual(
      out.spec!.volumes!.map((v) => v.name),
      ['gcp-iam-token', 'gcloud-config', 'external-credential-config'],
    );
    assert.ok(
      app.volumeMounts!.some((m) => m.name === 'gcloud-config' && m.mountPath === '/var/run/secrets/gcloud/config'),
    );
  });
});

describe('several providers on one ServiceAccount', () => {
  const all = {
    'eks.amazonaws.com/role-arn': AWS_ARN,
    'azure.workload.identity/client-id': AZ_CLIENT,
    'azure.workload.identity/tenant-id': AZ_TENANT,
    'cloud.google.com/workload-identity-provider': GCP_PROVIDER,
  };

  test('each gets its own token, audience, volume and path, with no collision', () => {
    const out = mutated(pod({ labels: { 'azure.workload.identity/use': 'true' } }), all);
    const volumes = out.spec!.volumes!;
    // The pfnet dialect without a Google service account: pfnet's direct mode, its own file volume.
    assert.deepEqual(
      volumes.map((v) => v.name),
      ['aws-iam-token', 'azure-identity-token', 'gcp-iam-token', 'external-credential-config'],
    );
    assert.deepEqual(
      volumes.slice(0, 3).map((v) => v.projected!.sources![0].serviceAccountToken!.audience),
      ['sts.amazonaws.com', 'api://AzureADTokenExchange', 'sts.googleapis.com'],
    );
    // Azure's token is mounted twice (its two layouts): five mount paths, all different.
    const paths = out.spec!.containers![0].volumeMounts!.map((m) => m.mountPath);
    assert.equal(new Set(paths).size, 5);
  });

  test('every invalid provider is reported in one denial', () => {
    const d = denied(
      pod(),
      {
        ...all,
        'eks.amazonaws.com/role-arn': 'nope',
        'cloud.google.com/workload-identity-provider': 'nope',
      },
      { strict: 'true' },
    );
    assert.match(d.message, /role-arn="nope".*; .*workload-identity-provider="nope"/);
  });

  test('the project skip label opts out of every provider', () => {
    const r = run(
      pod({ labels: { 'azure.workload.identity/use': 'true', 'workload-identity-webhook.io/skip': 'true' } }),
      all,
    );
    assert.deepEqual(r.allowed && r.patch, []);
  });

  test('a ServiceAccount with no identity leaves the Pod untouched', () => {
    const r = run(pod(), { 'example.com/unrelated': 'x' });
    assert.deepEqual(r.allowed && r.patch, []);
  });
});

describe('Pods the webhook leaves alone', () => {
  test('a mirror Pod (kubernetes.io/config.mirror) is admitted unchanged even when its ServiceAccount carries identities', () => {
    const p = pod({ annotations: { 'kubernetes.io/config.mirror': '3b1e3f0a' } });
    const result = run(p, {
      'eks.amazonaws.com/role-arn': AWS_ARN,
      'cloud.google.com/workload-identity-provider': GCP_PROVIDER,
    });
    assert.deepEqual(result.allowed && result.patch, []);
  });
});

describe('patch discipline', () => {
  const annotations = {
    'eks.amazonaws.com/role-arn': AWS_ARN,
    'cloud.google.com/workload-identity-provider': GCP_PROVIDER,
  };
  const rich = (): Pod => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'rich', annotations: { 'example.com/a~b/c': 'kept' }, labels: { app: 'x' } },
    spec: {
      serviceAccountName: 'app',
      futureField: { nested: [1, 2, 3] },
      volumes: [{ name: 'data', emptyDir: {} }],
      initContainers: [
        { name: 'mesh-proxy', image: 'proxy', restartPolicy: 'Always', startupProbe: { exec: { command: ['true'] } } },
      ],
      containers: [
        {
          name: 'app',
          image: 'app',
          startupProbe: { httpGet: { path: '/', port: 80 } },
          resizePolicy: [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }],
          env: [
            { name: 'AWS_ROLE_ARN', value: 'user-chose-this' },
            { name: 'X', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          ],
          volumeMounts: [{ name: 'data', mountPath: '/data' }],
        },
      ],
      ephemeralContainers: [{ name: 'debug', image: 'busybox' }],
    },
  });

  test('only additive operations; no container, containers array or volumes array is replaced', () => {
    const r = run(rich(), annotations);
    assert.ok(r.allowed);
    for (const op of r.patch) {
      assert.ok(
        op.op === 'add' || (op.op === 'replace' && op.path.startsWith('/metadata/annotations/')),
        JSON.stringify(op),
      );
      assert.doesNotMatch(op.path, /^\/spec\/(containers|initContainers|volumes)(\/\d+)?$/);
    }
  });

  test('every field the webhook does not know survives, and user env vars are never overwritten', () => {
    const before = rich();
    const out = mutated(before, annotations);
    assert.deepEqual(out.spec!.futureField, before.spec!.futureField);
    assert.deepEqual(out.spec!.ephemeralContainers, before.spec!.ephemeralContainers);
    assert.equal(out.spec!.initContainers![0].restartPolicy, 'Always');
    assert.deepEqual(out.spec!.initContainers![0].startupProbe, before.spec!.initContainers![0].startupProbe);
    assert.deepEqual(out.spec!.containers![0].startupProbe, before.spec!.containers![0].startupProbe);
    assert.deepEqual(out.spec!.containers![0].resizePolicy, before.spec!.containers![0].resizePolicy);
    assert.deepEqual(out.spec!.containers![0].env!.slice(0, 2), before.spec!.containers![0].env);
    assert.equal(envOf(out.spec!.containers![0]).AWS_ROLE_ARN, 'user-chose-this');
    assert.equal(out.metadata!.annotations!['example.com/a~b/c'], 'kept');
    // Native sidecars are treated like containers.
    assert.equal(envOf(out.spec!.initContainers![0]).AWS_ROLE_ARN, AWS_ARN);
  });

  test('idempotent: run on its own output, the patch is empty', () => {
    const once = mutated(rich(), annotations);
    const again = run(once, annotations);
    assert.deepEqual(again.allowed && again.patch, []);
    // The API server adds defaultMode to projected volumes; still recognised as ours.
    for (const v of once.spec!.volumes!) if (v.projected) v.projected.defaultMode = 420;
    assert.deepEqual((run(once, annotations) as { patch: unknown }).patch, []);
  });

  test('reinvocation: a container added after the first call is completed, others untouched', () => {
    const once = mutated(pod(), annotations);
    once.spec!.containers!.push({ name: 'sidecar', image: 'mesh' });
    const r = run(once, annotations);
    assert.ok(r.allowed);
    assert.ok(r.patch.length > 0);
    assert.ok(
      r.patch.every(
        (op) =>
          op.path.startsWith('/spec/containers/1/') ||
          op.path === '/metadata/annotations/workload-identity-webhook.io~1injected',
      ),
      JSON.stringify(r.patch),
    );
    const twice = apply(once, r.patch);
    assert.deepEqual(envOf(twice.spec!.containers![1]), envOf(twice.spec!.containers![0]));
  });

  test("a ServiceAccount changed by a later webhook: the old identity is removed, the user's values kept", () => {
    const azure = { 'azure.workload.identity/client-id': AZ_CLIENT, 'azure.workload.identity/tenant-id': AZ_TENANT };
    const first = pod({
      labels: { 'azure.workload.identity/use': 'true' },
      spec: {
        containers: [
          {
            name: 'app',
            env: [
              { name: 'AZURE_TENANT_ID', value: 'contoso.onmicrosoft.com' },
              { name: 'KEEP', value: '1' },
            ],
          },
        ],
      },
    });
    const once = mutated(first, azure);
    const raw = (p: typeof once) => p.metadata!.annotations!['workload-identity-webhook.io/injected'];
    const record = JSON.parse(raw(once));
    assert.deepEqual(
      record.env.map(([name]: [string]) => name),
      ['AZURE_CLIENT_ID', 'AZURE_FEDERATED_TOKEN_FILE', 'AZURE_AUTHORITY_HOST'],
    );
    assert.ok(!raw(once).includes(AZ_CLIENT), 'the record holds digests, never values');
    // Another webhook moves the Pod to a ServiceAccount with an AWS role and no Azure client.
    once.spec!.serviceAccountName = 'other';
    const r = mutatePod(providers(), {
      pod: once,
      namespace: 'team-a',
      serviceAccount: sa({ 'eks.amazonaws.com/role-arn': AWS_ARN }, 'other'),
    });
    assert.ok(r.allowed);
    const twice = apply(once, r.patch);
    // The Pod still opts into Azure, but the new ServiceAccount names no client: the old
    // AZURE_CLIENT_ID must not linger; the user's own AZURE_TENANT_ID stays.
    assert.deepEqual(envOf(twice.spec!.containers![0]), {
      AZURE_TENANT_ID: 'contoso.onmicrosoft.com',
      KEEP: '1',
      AZURE_FEDERATED_TOKEN_FILE: '/var/run/secrets/azure/tokens/azure-identity-token',
      AZURE_AUTHORITY_HOST: 'https://login.microsoftonline.com/',
      AWS_ROLE_ARN: AWS_ARN,
      AWS_WEB_IDENTITY_TOKEN_FILE: '/var/run/secrets/eks.amazonaws.com/serviceaccount/token',
    });
    assert.deepEqual(twice.spec!.volumes!.map((v) => v.name).sort(), ['aws-iam-token', 'azure-identity-token']);
    assert.deepEqual(
      (
        mutatePod(providers(), {
          pod: twice,
          namespace: 'team-a',
          serviceAccount: sa({ 'eks.amazonaws.com/role-arn': AWS_ARN }, 'other'),
        }) as { patch: unknown }
      ).patch,
      [],
    );
  });

  test('a ServiceAccount changed to one without identity: everything the webhook added is removed', () => {
    const once = mutated(pod(), annotations);
    once.spec!.serviceAccountName = 'plain';
    const r = mutatePod(providers(), { pod: once, namespace: 'team-a', serviceAccount: sa({}, 'plain') });
    assert.ok(r.allowed);
    const back = apply(once, r.patch);
    const expected = pod({ spec: { serviceAccountName: 'plain' } });
    expected.metadata!.annotations = {};
    expected.spec!.volumes = [];
    expected.spec!.containers![0].env = [];
    expected.spec!.containers![0].volumeMounts = [];
    assert.deepEqual(back, expected);
  });

  test("a user volume that merely shares the name is not taken for the webhook's own", () => {
    const p = pod({ spec: { volumes: [{ name: 'aws-iam-token', secret: { secretName: 'static-keys' } }] } });
    const d = denied(p, annotations);
    assert.equal(d.status, 409);
    assert.match(d.message, /already has a volume named "aws-iam-token"/);
  });

  test("a user mount at the webhook's path denies naming container, volume and path", () => {
    const p = pod({
      spec: {
        volumes: [{ name: 'mine', emptyDir: {} }],
        containers: [
          {
            name: 'app',
            volumeMounts: [{ name: 'mine', mountPath: '/var/run/secrets/eks.amazonaws.com/serviceaccount' }],
          },
        ],
      },
    });
    const d = denied(p, annotations);
    assert.match(
      d.message,
      /container "app" already mounts volume "mine" at \/var\/run\/secrets\/eks\.amazonaws\.com\/serviceaccount/,
    );
  });

  test('annotation keys with "/" and "~" are escaped in JSON Pointers', () => {
    const p = pod({ annotations: { 'a~b/c': 'x' } });
    const r = run(p, annotations);
    assert.ok(r.allowed);
    const op = r.patch.find((o) => o.path.startsWith('/metadata/annotations/cloud.google.com'));
    assert.equal(op?.path, '/metadata/annotations/cloud.google.com~1workload-identity-provider');
    assert.equal(apply(p, r.patch).metadata!.annotations!['a~b/c'], 'x');
  });

  test("a stale credential annotation is replaced: the key is the webhook's own", () => {
    const p = pod({ annotations: { 'cloud.google.com/external-credentials-json': '{}' } });
    const r = run(p, annotations);
    assert.ok(r.allowed);
    assert.ok(
      r.patch.some(
        (o) => o.op === 'replace' && o.path === '/metadata/annotations/cloud.google.com~1external-credentials-json',
      ),
    );
  });
});

describe('AWS EKS Pod Identity (container credentials)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wiw-pod-identity-'));
  const file = join(dir, 'associations.json');
  writeFileSync(file, JSON.stringify({ identities: [{ namespace: 'team-a', serviceAccount: 'app' }] }));
  const flags = { 'aws-container-credentials-config': file };
  const ccEnv = {
    AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://169.254.170.23/v1/credentials',
    AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE:
      '/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token',
  };

  test('an associated ServiceAccount gets the agent URI, the token file, its volume and the label, with the peer defaults', () => {
    const out = mutated(pod(), {}, flags);
    assert.equal(out.metadata!.labels!['eks.amazonaws.com/pod-identity'], 'enabled');
    assert.deepEqual(out.spec!.volumes, [
      {
        name: 'eks-pod-identity-token',
        projected: {
          sources: [
            {
              serviceAccountToken: {
                audience: 'pods.eks.amazonaws.com',
                expirationSeconds: 86400,
                path: 'eks-pod-identity-token',
              },
            },
          ],
        },
      },
    ]);
    const c = out.spec!.containers![0];
    assert.deepEqual(c.volumeMounts, [
      {
        name: 'eks-pod-identity-token',
        mountPath: '/var/run/secrets/pods.eks.amazonaws.com/serviceaccount',
        readOnly: true,
      },
    ]);
    assert.deepEqual(envOf(c), ccEnv);
  });

  test('takes precedence over IRSA: an associated ServiceAccount with a role ARN gets no web identity', () => {
    const out = mutated(
      pod(),
      { 'eks.amazonaws.com/role-arn': AWS_ARN, 'eks.amazonaws.com/sts-regional-endpoints': 'true' },
      { ...flags, 'aws-default-region': 'eu-west-1' },
    );
    assert.deepEqual(envOf(out.spec!.containers![0]), {
      AWS_STS_REGIONAL_ENDPOINTS: 'regional',
      AWS_DEFAULT_REGION: 'eu-west-1',
      AWS_REGION: 'eu-west-1',
      ...ccEnv,
    });
    assert.deepEqual(
      out.spec!.volumes!.map((v) => v.name),
      ['eks-pod-identity-token'],
    );
  });

  test('applies before the ServiceAccount is known, and not to ServiceAccounts the file does not name', () => {
    assert.deepEqual(envOf(mutated(pod(), undefined, flags).spec!.containers![0]), ccEnv);
    const other = pod({ spec: { serviceAccountName: 'other' } });
    const r = mutatePod(providers(flags), { pod: other, namespace: 'team-a', serviceAccount: undefined });
    assert.ok(r.allowed);
    assert.deepEqual(r.patch, []);
    const elsewhere = mutatePod(providers(flags), { pod: pod(), namespace: 'team-b', serviceAccount: undefined });
    assert.ok(elsewhere.allowed);
    assert.deepEqual(elsewhere.patch, []);
  });

  test("the Pod's token expiration wins, skip-containers and the skip label apply, Windows gets a Windows path", () => {
    const out = mutated(
      pod({
        annotations: { 'eks.amazonaws.com/token-expiration': '3600', 'eks.amazonaws.com/skip-containers': 'side' },
        spec: {
          nodeSelector: { 'kubernetes.io/os': 'windows' },
          containers: [{ name: 'app' }, { name: 'side' }],
        },
      }),
      { 'eks.amazonaws.com/token-expiration': '7200' },
      flags,
    );
    assert.equal(out.spec!.volumes![0].projected!.sources![0].serviceAccountToken!.expirationSeconds, 3600);
    assert.equal(
      envOf(out.spec!.containers![0]).AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE,
      'C:\\var\\run\\secrets\\pods.eks.amazonaws.com\\serviceaccount\\eks-pod-identity-token',
    );
    assert.equal(out.spec!.containers![1].env, undefined);
    const skipped = run(pod({ labels: { 'eks.amazonaws.com/skip-pod-identity-webhook': '' } }), {}, flags);
    assert.ok(skipped.allowed);
    assert.deepEqual(skipped.patch, []);
  });

  test('a container that sets either container-credentials variable gets neither; one that configures itself fully gets no mount', () => {
    const out = mutated(
      pod({
        spec: {
          containers: [
            { name: 'half', env: [{ name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI', value: 'http://127.0.0.1/creds' }] },
            {
              name: 'full',
              env: [
                { name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', value: '/mine' },
                { name: 'AWS_REGION', value: 'eu-west-1' },
                { name: 'AWS_STS_REGIONAL_ENDPOINTS', value: 'legacy' },
              ],
            },
          ],
        },
      }),
      {},
      flags,
    );
    const [half, full] = out.spec!.containers!;
    assert.deepEqual(envOf(half), { AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://127.0.0.1/creds' });
    assert.equal(half.volumeMounts?.length, 1);
    assert.equal(full.volumeMounts, undefined);
    assert.equal(full.env!.length, 3);
  });

  test("a Pod's own volume under the token volume's name is refused, naming it", () => {
    const d = denied(
      pod({ spec: { volumes: [{ name: 'eks-pod-identity-token', hostPath: { path: '/token' } }] } }),
      {},
      flags,
    );
    assert.equal(d.reason, 'Conflict');
    assert.match(d.message, /volume named "eks-pod-identity-token"/);
  });

  test('a label the user set stays when a later ServiceAccount change removes the injection; ours goes', () => {
    const moved = (p: Pod) => {
      p.spec!.serviceAccountName = 'other';
      const r = mutatePod(providers(flags), { pod: p, namespace: 'team-a', serviceAccount: sa({}, 'other') });
      assert.ok(r.allowed);
      return apply(p, r.patch);
    };
    const ours = moved(mutated(pod({ labels: { app: 'x' } }), {}, flags));
    assert.deepEqual(ours.metadata!.labels, { app: 'x' });
    assert.deepEqual(ours.spec!.volumes, []);
    const users = moved(mutated(pod({ labels: { 'eks.amazonaws.com/pod-identity': 'enabled' } }), {}, flags));
    assert.deepEqual(users.metadata!.labels, { 'eks.amazonaws.com/pod-identity': 'enabled' });
  });
});

describe("a container's own value of an injected credential variable", () => {
  const identities = {
    aws: { sa: { 'eks.amazonaws.com/role-arn': AWS_ARN }, labels: {} },
    azure: {
      sa: { 'azure.workload.identity/client-id': AZ_CLIENT, 'azure.workload.identity/tenant-id': AZ_TENANT },
      labels: { 'azure.workload.identity/use': 'true' },
    },
    gcp: {
      sa: {
        'cloud.google.com/workload-identity-provider': GCP_PROVIDER,
        'cloud.google.com/service-account-email': GCP_EMAIL,
      },
      labels: {},
    },
  } as const;
  const credentialEnv = { aws: AWS_CREDENTIAL_ENV, azure: AZURE_CREDENTIAL_ENV, gcp: GCP_CREDENTIAL_ENV };

  for (const [provider, names] of Object.entries(credentialEnv) as [
    keyof typeof credentialEnv,
    ReadonlySet<string>,
  ][]) {
    for (const variable of names) {
      test(`${provider} ${variable}: the container's value wins, with a warning naming it and the metric's labels`, () => {
        const { sa: base, labels } = identities[provider];
        // gcloud's own file variable is injected in direct mode with --gcp-direct-gcloud.
        const gcloudFile = variable === 'CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE';
        // The shared config file is injected for a ServiceAccount that lists several roles.
        const profiles = variable === 'AWS_CONFIG_FILE';
        const annotations = gcloudFile
          ? { ...base, 'cloud.google.com/injection-mode': 'direct' }
          : profiles
            ? { ...base, 'eks.amazonaws.com/role-arns': `reports=${AWS_ARN}` }
            : base;
        const flags: Record<string, string> = gcloudFile ? { 'gcp-direct-gcloud': 'true' } : {};
        const p = pod({
          labels,
          spec: {
            containers: [{ name: 'app "x"\n', image: 'busybox', env: [{ name: variable, value: '/old/key.json' }] }],
          },
        });
        const result = run(p, annotations, flags);
        assert.ok(result.allowed);
        const env = envOf(apply(p, result.patch).spec!.containers![0]);
        assert.equal(env[variable], '/old/key.json', "the user's value is kept");
        if (variable.startsWith('AWS_CONTAINER_')) {
          // EKS Pod Identity is not in force here: nothing of it is injected, nothing shadowed.
          assert.deepEqual(result.shadowed, []);
          return;
        }
        assert.deepEqual(result.shadowed, [{ provider, variable }]);
        const warning = result.warnings.find((w) => w.includes(variable))!;
        assert.ok(warning.startsWith('container "app \\"x\\"\\n" sets'), `the name is quoted: ${warning}`);
        assert.ok(!warning.includes('/old/key.json'), "the container's value is never echoed");
      });
    }
  }

  test("docs/install.md names exactly the clouds' credential variables (the metric's variable label)", () => {
    const install = readFileSync(join(import.meta.dirname, '../../docs/install.md'), 'utf8');
    const section = install.slice(install.indexOf('### Keeping an old credential'));
    const listed = section.slice(section.indexOf('(variables:'), section.indexOf(').', section.indexOf('(variables:')));
    assert.deepEqual(
      [...listed.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]),
      [...AWS_CREDENTIAL_ENV, ...AZURE_CREDENTIAL_ENV, ...GCP_CREDENTIAL_ENV],
    );
  });

  test("the same value as the injected one, or the webhook's own from an earlier admission, warns of nothing", () => {
    const first = run(pod(), identities.gcp.sa);
    assert.ok(first.allowed);
    const again = run(apply(pod(), first.patch), identities.gcp.sa);
    assert.ok(again.allowed);
    assert.deepEqual(again.shadowed, []);
    assert.deepEqual(again.warnings, []);
    const same = pod({
      spec: {
        containers: [
          {
            name: 'app',
            image: 'busybox',
            env: [{ name: 'GOOGLE_APPLICATION_CREDENTIALS', value: '/var/run/secrets/gcloud/config/federation.json' }],
          },
        ],
      },
    });
    const result = run(same, identities.gcp.sa);
    assert.ok(result.allowed);
    assert.deepEqual(result.shadowed, []);
  });
});
