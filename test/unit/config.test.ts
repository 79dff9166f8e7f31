import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig, settings } from '../../src/config.ts';
import { envName } from '../../src/settings.ts';
import { ConfigError } from '../../src/errors.ts';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const load = (flags: Record<string, string>, env: Record<string, string> = {}) =>
  loadConfig(new Map(Object.entries(flags)), env);

describe('configuration', () => {
  test('defaults match the single-cloud webhooks', () => {
    const c = load({});
    assert.equal(c.awsAudience, 'sts.amazonaws.com');
    assert.equal(c.awsTokenExpiration, 86400);
    assert.equal(c.azureCloud, 'AzurePublicCloud');
    assert.equal(c.azureTokenExpiration, 3600);
    assert.equal(c.port, 8443);
  });

  test('every flag has an environment twin, and the flag wins', () => {
    assert.equal(envName('aws-default-region'), 'WIW_AWS_DEFAULT_REGION');
    assert.equal(load({}, { WIW_AWS_DEFAULT_REGION: 'eu-west-1' }).awsDefaultRegion, 'eu-west-1');
    assert.equal(
      load({ 'aws-default-region': 'us-east-2' }, { WIW_AWS_DEFAULT_REGION: 'eu-west-1' }).awsDefaultRegion,
      'us-east-2',
    );
    for (const s of Object.values(settings)) assert.match(envName(s.flag), /^WIW_[A-Z0-9_]+$/);
  });

  test('--proxy-sources takes addresses and CIDRs of both families, and refuses anything else naming the flag', () => {
    assert.deepEqual(load({}).proxySources, []);
    assert.deepEqual(load({ 'proxy-sources': '10.0.0.0/8, 192.168.1.7,fd00::/8' }).proxySources, [
      '10.0.0.0/8',
      '192.168.1.7',
      'fd00::/8',
    ]);
    for (const bad of ['10.0.0.0/33', 'konnectivity-agent', '10.0.0.1/8/1', '::1/129', '10.0.0.0/'])
      assert.throws(
        () => load({ 'proxy-sources': bad }),
        (err: Error) =>
          err instanceof ConfigError && err.message.startsWith('--proxy-sources: ') && err.message.includes(`"${bad}"`),
        bad,
      );
    assert.equal(load({}).http2, true);
    assert.equal(load({ http2: 'false' }).http2, false);
  });

  test('the injected images take a digest; their defaults are floating tags; what is no image reference is refused', () => {
    const digest = `sha256:${'ab'.repeat(32)}`;
    const c = load({
      'azure-proxy-image': `mcr.microsoft.com/oss/azure/workload-identity/proxy:v1.6.0@${digest}`,
      'azure-proxy-init-image': `registry.example:5000/proxy-init@${digest}`,
      'gcp-gcloud-image': `gcr.io/google.com/cloudsdktool/google-cloud-cli:stable@${digest}`,
    });
    assert.equal(c.azureProxyImage, `mcr.microsoft.com/oss/azure/workload-identity/proxy:v1.6.0@${digest}`);
    assert.equal(c.azureProxyInitImage, `registry.example:5000/proxy-init@${digest}`);
    assert.equal(c.gcpGcloudImage, `gcr.io/google.com/cloudsdktool/google-cloud-cli:stable@${digest}`);
    const defaults = load({});
    for (const flag of ['azure-proxy-image', 'azure-proxy-init-image', 'gcp-gcloud-image']) {
      const setting = Object.values(settings).find((s) => s.flag === flag)!;
      assert.doesNotMatch(String(setting.default), /@sha256:/, `${flag}'s default is a tag`);
      assert.match(setting.description, /pin one with IMAGE:TAG@sha256:DIGEST/, `${flag} says its default floats`);
      for (const bad of [
        '',
        'gcr.io/x:stable; rm -rf /',
        'Registry.example/UPPER:1',
        `x@sha256:${'ab'.repeat(8)}`,
        'x:tag\nnext',
      ])
        assert.throws(
          () => load({ [flag]: bad }),
          (err: unknown) =>
            err instanceof ConfigError &&
            err.message.startsWith(`--${flag}=`) &&
            /is not an image reference/.test(err.message),
          `${flag}=${bad}`,
        );
    }
    assert.equal(defaults.gcpGcloudImage, 'gcr.io/google.com/cloudsdktool/google-cloud-cli:stable');
  });

  test('Azure clouds accept their names and short aliases', () => {
    assert.equal(load({ 'azure-cloud': 'china' }).azureCloud, 'AzureChinaCloud');
    assert.equal(load({ 'azure-cloud': 'AzureUSGovernmentCloud' }).azureCloud, 'AzureUSGovernmentCloud');
  });

  test('invalid values are refused with an error naming the flag', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ port: '80a' }, /--port="80a" is not a whole number/],
      [{ port: '70000' }, /--port=70000 is out of range; expected 0 to 65535/],
      [{ 'azure-token-expiration': '600' }, /--azure-token-expiration=600 is out of range; expected 3600 to 86400/],
      [{ 'azure-tenant-id': 'not a tenant' }, /--azure-tenant-id="not a tenant" is not a tenant id/],
      [{ 'log-level': 'loud' }, /--log-level="loud" must be one of: fatal, error, warn, info, debug, trace, silent/],
      [{ 'aws-sts-regional-endpoints': 'maybe' }, /--aws-sts-regional-endpoints="maybe" must be true or false/],
      [{ 'tls-cert-file': '/x.crt' }, /--tls-cert-file and --tls-key-file go together/],
      [{ 'ca-bundle-out': '/x' }, /--ca-bundle-out needs --self-signed/],
      [{ 'aws-annotation-prefix': 'Not_A_Domain' }, /--aws-annotation-prefix="Not_A_Domain" is not a DNS subdomain/],
    ];
    for (const [flags, message] of cases) {
      assert.throws(
        () => load(flags),
        (err: unknown) => err instanceof ConfigError && err.code === 'WIW_INVALID_CONFIG' && message.test(err.message),
        JSON.stringify(flags),
      );
    }
  });

  test('the EKS Pod Identity association file is read at start-up; a bad one is refused naming the file and the problem', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wiw-config-'));
    const file = (name: string, text: string) => {
      const path = join(dir, name);
      writeFileSync(path, text);
      return path;
    };
    const good = file('good.json', '{"identities":[{"namespace":"a","serviceAccount":"b"}]}');
    const c = load({ 'aws-container-credentials-config': good });
    assert.equal(c.awsContainerCredentialsConfig?.has('a', 'b'), true);
    assert.equal(c.awsContainerCredentialsConfig?.has('a', 'c'), false);
    assert.equal(c.awsContainerCredentialsAudience, 'pods.eks.amazonaws.com');
    assert.equal(c.awsContainerCredentialsFullUri, 'http://169.254.170.23/v1/credentials');
    assert.equal(load({}).awsContainerCredentialsConfig, undefined);
    // The peer's empty file: no associations, not an error.
    assert.equal(
      load({ 'aws-container-credentials-config': file('empty.json', '') }).awsContainerCredentialsConfig?.size,
      0,
    );
    const cases: [Record<string, string>, RegExp][] = [
      [
        { 'aws-container-credentials-config': join(dir, 'missing.json') },
        /--aws-container-credentials-config: cannot read .*missing\.json: ENOENT/,
      ],
      [{ 'aws-container-credentials-config': file('bad.json', '{"identities":') }, /bad\.json: not JSON/],
      [
        { 'aws-container-credentials-config': file('list.json', '{"identities":{}}') },
        /list\.json: "identities" is not a list; expected \{"identities"/,
      ],
      [
        { 'aws-container-credentials-config': file('entry.json', '{"identities":[{"namespace":"a"}]}') },
        /entry\.json: identities\[0\]\.serviceAccount is missing or not a non-empty string/,
      ],
      [
        { 'aws-container-credentials-token-mount-path': 'relative' },
        /--aws-container-credentials-token-mount-path="relative" is not an absolute path/,
      ],
      [
        { 'aws-container-credentials-token-volume-name': 'Bad_Name' },
        /--aws-container-credentials-token-volume-name="Bad_Name" is not a volume name/,
      ],
      [
        { 'aws-container-credentials-token-path': '../x' },
        /--aws-container-credentials-token-path="..\/x" is not a relative file path/,
      ],
      [{ 'aws-container-credentials-full-uri': ' ' }, /--aws-container-credentials-full-uri must not be empty/],
    ];
    for (const [flags, message] of cases) {
      assert.throws(
        () => load(flags),
        (err: unknown) => err instanceof ConfigError && message.test(err.message),
        JSON.stringify(flags),
      );
    }
  });
});
