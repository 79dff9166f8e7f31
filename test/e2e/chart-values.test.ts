// The Helm chart's values against the code: every setting of src/config.ts and of the token
// requestor is a value, set by the chart, or named as without one; the defaults are the code's;
// each value reaches the container and is read back. And values.schema.json and the chart README,
// generated from values.yaml (npm run chart-docs), which helm enforces.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { chartDocs, flagsWithoutValue, readValueKeys, type ValueKey, valuesSchema } from '../../scripts/chart-docs.ts';
import { loadConfig, settings } from '../../src/config.ts';
import type { Setting } from '../../src/settings.ts';
import { IMAGE_REFERENCE } from '../../src/settings.ts';
import { loadRequestorConfig, requestorSettings } from '../../src/token-requestor/config.ts';
import {
  CHART,
  FULLNAME,
  HelmError,
  TEST_CA_PEM,
  containerEnv,
  find,
  lintChart,
  renderChart,
  webhookDeployment,
} from '../support/chart.ts';

const valuesYaml = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, any>;
const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8'));
type SettingKey = keyof typeof settings;

/**
 * Settings the chart sets itself, from another value, and the values that drive them.
 * Every other setting must be a key of `config` in values.yaml, or a development-only flag.
 */
const CHART_MANAGED: Partial<
  Record<SettingKey, { values: Record<string, any>; expect: string | RegExp; kubeVersion?: string }>
> = {
  tlsCertFile: {
    values: { certificates: { mode: 'certManager' } },
    expect: '/etc/workload-identity-webhook/tls/tls.crt',
  },
  tlsKeyFile: {
    values: { certificates: { mode: 'provided', provided: { secretName: 's', caBundle: TEST_CA_PEM } } },
    expect: '/etc/workload-identity-webhook/tls/tls.key',
  },
  certSecret: { values: { certificates: { selfManaged: { secretName: 'my-certs' } } }, expect: 'my-certs' },
  certSecretNamespace: { values: {}, expect: 'wiw-system' },
  slippedPodsLeaseNamespace: { values: {}, expect: 'wiw-system' },
  certWebhookConfiguration: { values: {}, expect: FULLNAME },
  selfSignedHosts: {
    values: { clusterDomain: 'corp.local' },
    expect: `${FULLNAME},${FULLNAME}.wiw-system,${FULLNAME}.wiw-system.svc,${FULLNAME}.wiw-system.svc.corp.local`,
  },
  certValiditySeconds: { values: { certificates: { selfManaged: { validitySeconds: 7776000 } } }, expect: '7776000' },
  certRenewBeforeSeconds: {
    values: { certificates: { selfManaged: { renewBeforeSeconds: 2592000 } } },
    expect: '2592000',
  },
  certPropagationSeconds: { values: { certificates: { selfManaged: { propagationSeconds: 30 } } }, expect: '30' },
  certResyncSeconds: { values: { certificates: { selfManaged: { resyncSeconds: 20 } } }, expect: '20' },
  azureEnvironmentFilepath: {
    values: { azureStackEnvironment: { configMap: 'azure-stack' } },
    expect: '/etc/workload-identity-webhook/azure/azurestackcloud.json',
  },
  awsContainerCredentialsConfig: {
    values: { awsPodIdentity: { configMap: 'eks-pod-identity' } },
    expect: '/etc/workload-identity-webhook/pod-identity/associations.json',
  },
  policyFile: {
    values: { policy: { configMap: 'wiw-policy' } },
    expect: '/etc/workload-identity-webhook/policy/policy.yaml',
  },
  failurePolicy: { values: { webhook: { failurePolicy: 'Ignore' } }, expect: 'Ignore' },
  policyParameters: { values: { injection: { mode: 'both' } }, expect: 'true', kubeVersion: '1.36.3' },
  policyParametersLeaseNamespace: {
    values: { injection: { mode: 'policy' } },
    expect: 'wiw-system',
    kubeVersion: '1.36.3',
  },
  clientCaFile: {
    values: { clientAuth: { caBundle: TEST_CA_PEM } },
    expect: '/etc/workload-identity-webhook/client-ca/ca.crt',
  },
};
/**
 * Flags no value sets: development flags with no meaning inside a cluster, and one whose default
 * a cluster wants; extraArgs passes any of them (the chart README's Values section says which).
 */
const WITHOUT_VALUE: Partial<Record<SettingKey, string>> = {
  selfSigned: 'a throwaway CA nobody could put in a caBundle',
  caBundleOut: 'goes with --self-signed',
  kubeconfig: 'the in-cluster ServiceAccount is used',
  kubeContext: 'goes with --kubeconfig',
  recordKeyFile: 'replicas share the key derived from the serving key they read from one Secret (extraArgs can set it)',
  awsEksClusterName: 'read by trust and doctor, run by a person against the cluster, not by serve',
  awsRoleTrustPolicyLength: 'read by trust and doctor, run by a person against the cluster, not by serve',
};

function envName(flag: string): string {
  return 'WIW_' + flag.toUpperCase().replaceAll('-', '_');
}

function configFlagTable(): Record<string, string> {
  const helpers = readFileSync(join(CHART, 'templates/_helpers.tpl'), 'utf8');
  const body = /define "wiw\.configFlags" -\}\}\n([\s\S]*?)\{\{- end \}\}/.exec(helpers)?.[1];
  assert.ok(body, 'wiw.configFlags is defined in _helpers.tpl');
  return parse(body) as Record<string, string>;
}

describe('values cover the webhook', () => {
  test('every setting in src/config.ts is a chart value, set by the chart, or one the README names as without a value', () => {
    const table = configFlagTable();
    const configKeys = Object.keys(valuesYaml.config).sort();
    assert.deepEqual(
      Object.keys(table).sort(),
      configKeys,
      'wiw.configFlags and values.yaml config have the same keys',
    );
    for (const key of Object.keys(settings) as SettingKey[]) {
      const homes = [key in table, key in CHART_MANAGED, key in WITHOUT_VALUE].filter(Boolean).length;
      assert.equal(
        homes,
        1,
        `setting ${key} (--${settings[key].flag}) must be exactly one of: config.${key} in values.yaml, chart-managed, without a value`,
      );
      if (key in table) assert.equal(table[key], settings[key].flag, `config.${key} maps to --${settings[key].flag}`);
    }
    for (const key of configKeys) assert.ok(key in settings, `config.${key} is a setting of src/config.ts`);
    // The README's list (generated) is exactly these: the chart-managed ones are found in the templates.
    assert.deepEqual(
      flagsWithoutValue().sort(),
      (Object.keys(WITHOUT_VALUE) as SettingKey[]).map((k) => settings[k].flag).sort(),
    );
    const readme = readFileSync(join(CHART, 'README.md'), 'utf8');
    for (const flag of flagsWithoutValue()) assert.match(readme, new RegExp(`no value sets .*\`--${flag}\``));
    assert.doesNotMatch(readme, /every flag of the webhook has a value/);
  });

  test("values.yaml config defaults are the webhook's defaults", () => {
    for (const [key, value] of Object.entries(valuesYaml.config)) {
      const setting = (settings as Record<string, Setting<unknown>>)[key];
      // A file mode is written as an octal string in YAML; the webhook holds the number.
      const read =
        typeof setting.default === 'number' && typeof value === 'string' ? setting.parse(value, setting.flag) : value;
      assert.deepEqual(read === '' ? undefined : read, setting.default, `config.${key}`);
    }
  });

  test('each config value reaches the container as its WIW_ variable, and the webhook reads it back', async () => {
    const values = {
      config: {
        port: 9443,
        metricsPort: 9191,
        drainSeconds: 7,
        logLevel: 'debug',
        logFormat: 'named',
        cacheMissTimeoutMs: 3000,
        cacheMissRate: 20,
        slippedPodsIntervalSeconds: 300,
        strict: true,
        awsAnnotationPrefix: 'iam.example.com',
        awsDefaultRegion: 'eu-west-1',
        awsAudience: 'aud',
        awsTokenExpiration: 7200,
        awsStsRegionalEndpoints: true,
        awsRoleSessionName: 'pod-name',
        awsComposeRoleArn: true,
        awsComposeRoleArnAccount: '111122223333',
        awsComposeRoleArnPartition: 'aws-us-gov',
        awsContainerCredentialsAudience: 'pods.example.com',
        awsContainerCredentialsFullUri: 'http://169.254.170.23/v2/credentials',
        awsContainerCredentialsTokenMountPath: '/var/run/pod-identity',
        awsContainerCredentialsTokenVolumeName: 'pod-identity-token',
        awsContainerCredentialsTokenPath: 'token',
        azureTenantId: 'contoso.onmicrosoft.com',
        azureCloud: 'AzureChinaCloud',
        azureAudience: 'api://x',
        azureTokenExpiration: 7200,
        azureProxyImage: 'registry.example/azwi/proxy:v1',
        azureProxyInitImage: 'registry.example/azwi/proxy-init:v1',
        azureProxyNativeSidecar: false,
        azureProxyLogLevel: 'debug',
        gcpDefaultRegion: 'europe-west1',
        gcpAudience: 'gcp-aud',
        gcpTokenExpiration: 7200,
        gcpGcloudImage: 'registry.example/cloud-sdk:1',
        gcpFileMode: '0400',
        gcpSetupContainerResources: '{"requests":{"cpu":"100m"}}',
        gcpDefaultInjectionMode: 'direct',
        gcpDirectGcloud: true,
        host: '0.0.0.0',
        metricsHost: '127.0.0.1',
        metricsNamespaceLabel: false,
        gcpAllowedTokenUrls: ['https://sts.googleapis.com/v1/token', 'https://sts.example.com/v1/token'],
        secretTokenPath: '/var/run/identity/token',
        watchPolicies: true,
        policyFailureMode: 'keep-last-good',
        tlsMinVersion: 'TLSv1.3',
        tlsCipherSuites: ['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384'],
        maxRequestBytes: 8388608,
        maxInflightRequestBytes: 67108864,
        maxContainers: 100,
        maxPatchBytes: 2097152,
        maxConnections: 1000,
        maxConnectionsPerSource: 200,
        firstRequestTimeoutMs: 3000,
        proxySources: ['10.8.0.0/14', '192.168.7.1'],
        http2: false,
        maxConcurrentStreams: 64,
        maxConnectionAgeSeconds: 120,
      },
    };
    const table = configFlagTable();
    assert.deepEqual(Object.keys(values.config).sort(), Object.keys(table).sort(), 'this test sets every config key');
    const env = containerEnv(webhookDeployment((await renderChart(values)).manifests));
    for (const [key, value] of Object.entries(values.config))
      assert.equal(env[envName(table[key])], String(value), `config.${key}`); // arrays join with commas
    const config = loadConfig(new Map(), env);
    const asRead: Record<string, unknown> = {
      gcpFileMode: 0o400,
      gcpSetupContainerResources: { requests: { cpu: '100m' } },
      awsRoleSessionName: { podName: true },
    };
    for (const [key, value] of Object.entries(values.config))
      assert.deepEqual(
        (config as Record<string, unknown>)[key],
        key in asRead ? asRead[key] : value,
        `config.${key} read back`,
      );
  });

  for (const [key, { values, expect, kubeVersion }] of Object.entries(CHART_MANAGED)) {
    test(`chart-managed --${settings[key as SettingKey].flag} is rendered from its value`, async () => {
      const env = containerEnv(webhookDeployment((await renderChart(values, { kubeVersion })).manifests));
      const actual = env[envName(settings[key as SettingKey].flag)];
      if (expect instanceof RegExp) assert.match(actual, expect);
      else assert.equal(actual, expect);
    });
  }

  test('every token-requestor setting is a tokenRequestor.config value or set by the chart, and it reads them back', async () => {
    const helpers = readFileSync(join(CHART, 'templates/_helpers.tpl'), 'utf8');
    const table = parse(
      /define "wiw\.tokenRequestorFlags" -\}\}\n([\s\S]*?)\{\{- end \}\}/.exec(helpers)![1],
    ) as Record<string, string>;
    const chartManaged = {
      leaseNamespace: 'WIW_LEASE_NAMESPACE',
      leaseName: 'WIW_LEASE_NAME',
      identity: 'WIW_IDENTITY (the Pod name)',
      namespaces: 'WIW_NAMESPACES (tokenRequestor.namespaces)',
      watchScope: 'WIW_WATCH_SCOPE (tokenRequestor.watchScope: its RBAC follows it)',
    };
    assert.deepEqual(Object.keys(table).sort(), Object.keys(valuesYaml.tokenRequestor.config).sort());
    for (const [key, s] of Object.entries(requestorSettings)) {
      assert.equal(
        [key in table, key in chartManaged].filter(Boolean).length,
        1,
        `token-requestor setting ${key} (--${s.flag}) has one home in the chart`,
      );
      if (key in table) {
        assert.equal(table[key], s.flag);
        assert.equal(valuesYaml.tokenRequestor.config[key], s.default, `tokenRequestor.config.${key} default`);
      }
    }
    const { manifests } = await renderChart({
      tokenRequestor: {
        enabled: true,
        namespaces: ['apps', 'batch'],
        leaseName: 'wi-lease',
        config: { leaseDurationSeconds: 20, tokenExpiration: 7200 },
      },
    });
    const d = find(manifests, 'Deployment', `${FULLNAME}-token-requestor`)!;
    const env = containerEnv(d);
    const identity = d.spec.template.spec.containers[0].env.find((e: any) => e.name === 'WIW_IDENTITY');
    assert.deepEqual(identity.valueFrom, { fieldRef: { fieldPath: 'metadata.name' } });
    const rc = loadRequestorConfig(new Map(), { ...env, WIW_IDENTITY: 'pod-1' });
    assert.deepEqual(rc, {
      leaseNamespace: 'wiw-system',
      leaseName: 'wi-lease',
      leaseDurationSeconds: 20,
      identity: 'pod-1',
      namespaces: ['apps', 'batch'],
      watchScope: 'namespaces',
      tokenExpiration: 7200,
    });
    assert.doesNotThrow(() => loadConfig(new Map(), env), 'the shared settings it reads are valid too');
    assert.deepEqual(find(manifests, 'Role', `${FULLNAME}-token-requestor`)!.rules[0].resourceNames, ['wi-lease']);
    assert.ok(find(manifests, 'Lease', 'wi-lease'));
  });

  test('the container port and the probes follow config.port', async () => {
    const c = webhookDeployment((await renderChart({ config: { port: 9443 } })).manifests).spec.template.spec
      .containers[0];
    assert.equal(c.ports[0].containerPort, 9443);
    assert.equal(c.livenessProbe.httpGet.port, 'https');
  });
});

describe('values.schema.json and README', () => {
  function leaves(obj: Record<string, any>, prefix = ''): string[] {
    return Object.entries(obj).flatMap(([k, v]) => {
      const path = prefix ? `${prefix}.${k}` : k;
      const isMapOfSettings = v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0;
      return isMapOfSettings ? leaves(v, path) : [path];
    });
  }
  const keys = readValueKeys(readFileSync(join(CHART, 'values.yaml'), 'utf8'));
  const everyKey = (ks: ValueKey[]): ValueKey[] => ks.flatMap((k) => [k, ...everyKey(k.children)]);

  test('values.schema.json and the README table are what values.yaml generates (npm run chart-docs)', () => {
    const generated = chartDocs();
    assert.equal(readFileSync(join(CHART, 'values.schema.json'), 'utf8'), generated.schema, 'npm run chart-docs');
    assert.equal(readFileSync(join(CHART, 'README.md'), 'utf8'), generated.readme, 'npm run chart-docs');
  });

  test('the schema has every value of values.yaml, each with a description', () => {
    const all = everyKey(keys);
    assert.ok(all.length > 200, `${all.length} values`);
    for (const key of all) {
      let node = schema;
      for (const part of key.path) node = node.properties?.[part];
      assert.ok(node, `values.schema.json has ${key.path.join('.')}`);
      assert.ok(node.description?.length > 3, `${key.path.join('.')} has a description`);
    }
  });

  test('a value without a comment is refused by the generator, naming it', () => {
    const text = '# The image.\nimage:\n  # The repository.\n  repository: x\n  tag: ""\n';
    assert.throws(() => valuesSchema(readValueKeys(text)), /values\.yaml: image\.tag has no comment/);
    // A key the line reader cannot see (a flow map) is refused rather than left undescribed.
    assert.throws(() => readValueKeys('# A map.\nimage: {repository: x}\n'), /image\.repository was not read/);
  });

  test('helm checks values against the schema: a wrong type fails lint and template with the schema message', async () => {
    for (const [values, message] of [
      [{ replicaCount: 'two' }, /replicaCount: Invalid type\. Expected: integer, given: string/],
      [{ config: { strict: 'sometimes' } }, /config\.strict: Invalid type\. Expected: boolean, given: string/],
      [{ extraArgs: '--strict' }, /extraArgs: Invalid type\. Expected: array, given: string/],
      [{ tokenRequestor: { podDisruptionBudget: { enabeld: true } } }, /Additional property enabeld is not allowed/],
    ] as const) {
      await assert.rejects(renderChart(values), (err: unknown) => err instanceof HelmError && message.test(err.stderr));
      await assert.rejects(lintChart(values), (err: unknown) => err instanceof HelmError && message.test(err.stdout));
    }
  });

  test('the schema refuses bad values before anything renders', async () => {
    for (const [values, message] of [
      [{ webhook: { failurePolicy: 'Sometimes' } }, /failurePolicy must be one of/],
      [{ webhook: { timeoutSeconds: 31 } }, /timeoutSeconds/],
      [{ certificates: { mode: 'vault' } }, /certificates.mode must be one of/],
      [{ config: { nope: 1 } }, /Additional property nope is not allowed/],
      [{ config: { awsDefaultRegion: 'EU_WEST_1' } }, /awsDefaultRegion/], // what --aws-default-region refuses
    ] as const) {
      await assert.rejects(renderChart(values), (err: unknown) => err instanceof HelmError && message.test(err.stderr));
    }
  });

  test('the injected images take a digest; the schema refuses what is no image reference, as the flags do', async () => {
    const pinned = `registry.example/azwi/proxy:v1.6.0@sha256:${'0123456789abcdef'.repeat(4)}`;
    const env = containerEnv(webhookDeployment((await renderChart({ config: { azureProxyImage: pinned } })).manifests));
    assert.equal(env.WIW_AZURE_PROXY_IMAGE, pinned);
    for (const key of ['azureProxyImage', 'azureProxyInitImage', 'gcpGcloudImage']) {
      assert.equal(schema.properties.config.properties[key].pattern, IMAGE_REFERENCE.source, key);
      await assert.rejects(
        renderChart({ config: { [key]: 'gcr.io/x:stable; rm -rf /' } }),
        (err: unknown) => err instanceof HelmError && new RegExp(key).test(err.stderr),
      );
    }
  });

  test('the chart README has a row for every value', () => {
    const readme = readFileSync(join(CHART, 'README.md'), 'utf8').split('## Values')[1];
    const rows = new Set([...readme.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]));
    for (const path of leaves(valuesYaml)) assert.ok(rows.has(path), `README.md documents ${path}`);
    for (const row of rows) assert.ok(leaves(valuesYaml).includes(row), `README.md row ${row} is a value`);
  });

  test("a config value is described by its flag, and by the flag's help where values.yaml says nothing more", () => {
    assert.match(schema.properties.config.properties.awsAudience.description, /^`--aws-audience`: /);
    assert.ok(
      schema.properties.config.properties.awsAudience.description.endsWith(`${settings.awsAudience.description}.`),
    );
    assert.match(schema.properties.config.properties.port.description, /^`--port`: HTTPS port/);
  });
});
