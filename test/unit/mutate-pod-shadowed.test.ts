// A container's own value of an injected credential variable: it wins, the warning names it (never
// its value), the metric counts it, and docs/install.md lists exactly these variables.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { apply, envOf, pod } from '../support/builders.ts';
import { AWS_CREDENTIAL_ENV } from '../../src/clouds/aws/conventions.ts';
import { AZURE_CREDENTIAL_ENV } from '../../src/clouds/azure/pod.ts';
import { GCP_CREDENTIAL_ENV } from '../../src/clouds/gcp/conventions.ts';
import {
  CLIENT as AZ_CLIENT,
  GCP_EMAIL,
  ROLE_ARN as AWS_ARN,
  TENANT as AZ_TENANT,
  WIF_PROVIDER as GCP_PROVIDER,
} from '../support/identities.ts';
import { run } from '../support/mutate-pod.ts';

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
