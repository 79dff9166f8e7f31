// The pfnet dialect of Workload Identity Federation: pfnet's defaults, its gcloud setup container
// and direct mode, its loose provider names, and pfnet main's flags.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Pod } from '../../src/kube/types.ts';
import { envOf, pod } from '../support/builders.ts';
import { PFNET_SETUP_SCRIPT } from '../../src/clouds/gcp/gcloud-setup.ts';
import { KUBELET_HOSTILE } from '../support/hostile.ts';
import { GCP_EMAIL, WIF_PROVIDER as GCP_PROVIDER } from '../support/identities.ts';
import { denied, mutated, PFNET_SA, run } from '../support/mutate-pod.ts';

describe('GCP (Workload Identity Federation): the pfnet dialect', () => {
  function credentials(out: Pod) {
    return JSON.parse(out.metadata!.annotations!['cloud.google.com/external-credentials-json']);
  }

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
