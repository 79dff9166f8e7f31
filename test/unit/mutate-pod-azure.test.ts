// Microsoft Entra Workload ID as the core renders it: the opt-in label, the proxy, the tenant and
// authority host, expiry bounds, and values the Azure peer reads its own way.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { apply, envOf, pod } from '../support/builders.ts';
import { containerEnv } from '../support/kubelet-expansion.ts';
import { CLIENT as AZ_CLIENT, TENANT as AZ_TENANT } from '../support/identities.ts';
import { denied, mutated, run } from '../support/mutate-pod.ts';

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
