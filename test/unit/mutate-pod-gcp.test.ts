// Workload Identity Federation as the core renders it, in both dialects: the external_account
// file, audiences, expiry, the project, Windows paths (pfnet's own modes: mutate-pod-gcp-pfnet).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Pod } from '../../src/kube/types.ts';
import { config, envOf, pod } from '../support/builders.ts';
import { ConfigError } from '../../src/errors.ts';
import { KUBELET_HOSTILE } from '../support/hostile.ts';
import { GCP_EMAIL, WIF_PROVIDER as GCP_PROVIDER } from '../support/identities.ts';
import { denied, mutated, PFNET_SA } from '../support/mutate-pod.ts';

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
});
