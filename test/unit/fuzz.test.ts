// Seeded, bounded fuzzing of what callers control: the AdmissionReview envelope, Pods and their
// ServiceAccounts' annotations, labelled Secrets and their configs. Properties: never an
// exception; a patch always applies; nothing of the user's object is lost; a second run on the
// output changes nothing. A failure prints its seed: WIW_FUZZ_SEED=<seed> reproduces it.
// test/e2e/fuzz-serve.test.ts sends mutated reviews over HTTPS to a real `serve` in the chart's memory
// limit; each cause it found has a unit test at the end of this file.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fastJsonPatch from 'fast-json-patch';
import { admitPod } from '../../src/admission/pods.ts';
import { admitSecret } from '../../src/admission/secrets.ts';
import { parseAdmissionReview, type AdmissionRequest, type Decision } from '../../src/admission/review.ts';
import { WebhookError } from '../../src/errors.ts';
import type { Container, Pod, Secret, ServiceAccountView } from '../../src/kube/types.ts';
import { INJECTED_ANNOTATION, RecordKeys } from '../../src/mutate/injection-record.ts';
import { createSecretProviders } from '../../src/clouds/index.ts';
import { setMembers, type PatchOperation } from '../../src/mutate/patch.ts';
import { apply, config, pod as examplePod, providers } from '../support/builders.ts';
import { CLIENT, GCP_AUDIENCE, GCP_EMAIL, ROLE_ARN, TENANT, WIF_PROVIDER } from '../support/identities.ts';
import { b64 } from '../support/secrets.ts';
import { rng, type Rng } from '../support/review-fuzz.ts';

const BASE_SEED = Number(process.env.WIW_FUZZ_SEED ?? 20261123);
const RUNS = Number(process.env.WIW_FUZZ_RUNS ?? 4000);

const NAMES = ['app', 'sidecar', 'constructor', '__proto__', 'toString', 'a'.repeat(63), 'init', 'mesh-proxy', ''];
const ENV_NAMES = [
  'AWS_ROLE_ARN',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_REGION',
  'AZURE_CLIENT_ID',
  'AZURE_TENANT_ID',
  'GOOGLE_APPLICATION_CREDENTIALS',
  'HTTPS_PROXY',
  'constructor',
  'X',
];
const VOLUME_NAMES = ['aws-iam-token', 'azure-identity-token', 'gcp-iam-token', 'data', 'corp-ca', 'constructor'];
const PATHS = [
  '/var/run/secrets/eks.amazonaws.com/serviceaccount',
  '/var/run/secrets/azure/tokens',
  '/data',
  '/var/run/secrets/sts.googleapis.com/serviceaccount',
];
const SA_VALUES: Record<string, readonly string[]> = {
  'eks.amazonaws.com/role-arn': [
    ROLE_ARN,
    'arn:aws:iam::1:role/x',
    '',
    'arn:aws-cn:iam::111122223333:role/a/b/c',
    '\u0000',
  ],
  'eks.amazonaws.com/token-expiration': ['3600', '1h', '-1', '99999999999999', '', ' 600 '],
  'eks.amazonaws.com/sts-regional-endpoints': ['true', 'yes', 'False', ''],
  'eks.amazonaws.com/audience': ['sts.amazonaws.com', '', 'x'.repeat(300)],
  'azure.workload.identity/client-id': [CLIENT, '', 'not-a-guid'],
  'azure.workload.identity/tenant-id': [TENANT, 'contoso.onmicrosoft.com', '', '..'],
  'azure.workload.identity/service-account-token-expiration': ['3600', '100', '86401', 'x', ''],
  'cloud.google.com/workload-identity-provider': [WIF_PROVIDER, 'projects/x', '', `${WIF_PROVIDER}/extra`],
  'cloud.google.com/service-account-email': [GCP_EMAIL, 'nobody', ''],
  'cloud.google.com/injection-mode': ['direct', 'gcloud', 'GCLOUD', 'bogus'],
  'cloud.google.com/audience': [GCP_AUDIENCE, ''],
  // The asks of issue 22 §3: several identities, a region, a project.
  'eks.amazonaws.com/role-arns': [
    `writer=${ROLE_ARN}`,
    `default=${ROLE_ARN},x=${ROLE_ARN}`,
    'a',
    'a=b',
    `[x]=${ROLE_ARN}`,
    '',
    '\n',
  ],
  'eks.amazonaws.com/region': ['eu-west-1', 'EU', '', ' us-east-1 '],
  'azure.workload.identity/container-client-ids': [`sidecar=${CLIENT}`, `app=${CLIENT};app=${CLIENT}`, 'app=x', ';'],
  'cloud.google.com/project-id': ['my-project', '123', '', 'a:b'],
  'cloud.google.com/workload-identity-providers': [
    `b=${WIF_PROVIDER}`,
    `b=${WIF_PROVIDER}:x@y.iam.gserviceaccount.com`,
    'b=x',
    ',',
  ],
};

function randomString(r: Rng): string {
  return r.pick(['', 'x', 'ü∂', '{"a":1}', '\\u0000', 'a/b~c', ' ', '${HOME}', '9'.repeat(20)]);
}

function randomContainer(r: Rng): Container {
  const c: Container = { name: r.pick(NAMES.slice(0, 8)) + (r.chance(0.5) ? String(r.int(3)) : ''), image: 'busybox' };
  if (r.chance(0.5))
    c.env = Array.from({ length: r.int(4) }, () =>
      r.chance(0.8)
        ? { name: r.pick(ENV_NAMES), value: r.chance(0.5) ? ROLE_ARN : randomString(r) }
        : ({ name: r.pick(ENV_NAMES), valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } } as never),
    );
  if (r.chance(0.3)) c.volumeMounts = [{ name: r.pick(VOLUME_NAMES), mountPath: r.pick(PATHS) }];
  if (r.chance(0.2))
    c.envFrom = [
      r.pick([{ configMapRef: { name: 'cm' } }, { prefix: 'AWS_', secretRef: { name: 's' } }, { prefix: 'APP_' }]),
    ];
  if (r.chance(0.2)) (c as Record<string, unknown>).startupProbe = { exec: { command: ['true'] } };
  if (r.chance(0.1)) (c as Record<string, unknown>).restartPolicy = 'Always';
  return c;
}

function uniqueNames(containers: Container[]): Container[] {
  const seen = new Set<string>();
  return containers.filter((c) => (seen.has(c.name) ? false : (seen.add(c.name), true)));
}

function randomPod(r: Rng): Pod {
  const annotations: Record<string, string> = {};
  if (r.chance(0.3))
    annotations[INJECTED_ANNOTATION] = r.pick([
      '{}',
      'null',
      '[',
      JSON.stringify({ v: 2, sa: 'x', env: [['HTTPS_PROXY', 'abc']], vol: [], ann: [], keep: [], mac: 'x' }),
      JSON.stringify({ sa: 'x', env: { app: ['HTTPS_PROXY'] }, volumes: ['corp-ca'], annotations: [] }),
    ]);
  if (r.chance(0.2)) annotations['eks.amazonaws.com/token-expiration'] = r.pick(['7200', 'x', '']);
  if (r.chance(0.2)) annotations['eks.amazonaws.com/skip-containers'] = r.pick(['app', 'app,sidecar', ',,']);
  if (r.chance(0.2)) annotations['azure.workload.identity/skip-containers'] = r.pick(['app', 'app;sidecar', ';']);
  if (r.chance(0.2)) annotations['eks.amazonaws.com/include-containers'] = r.pick(['app', 'sidecar,ghost', ',']);
  if (r.chance(0.2)) annotations['cloud.google.com/include-containers'] = r.pick(['app,sidecar', 'ghost', ' ']);
  if (r.chance(0.2)) annotations['example.com/a~b/c'] = randomString(r);
  if (r.chance(0.1)) annotations['eks.amazonaws.com/region'] = r.pick(['eu-central-1', 'x y']);
  const labels: Record<string, string> = {};
  if (r.chance(0.5)) labels['azure.workload.identity/use'] = r.pick(['true', 'false', 'TRUE']);
  if (r.chance(0.1)) labels['workload-identity-webhook.io/skip'] = '';
  const spec: Pod['spec'] = {
    serviceAccountName: 'app',
    containers: uniqueNames(Array.from({ length: 1 + r.int(4) }, () => randomContainer(r))),
  };
  if (r.chance(0.3))
    spec.initContainers = uniqueNames(Array.from({ length: 1 + r.int(2) }, () => randomContainer(r))).map((c) => ({
      ...c,
      name: `init-${c.name}`,
    }));
  if (r.chance(0.4))
    spec.volumes = [
      {
        name: r.pick(VOLUME_NAMES),
        ...(r.chance(0.5)
          ? { emptyDir: {} }
          : {
              projected: {
                sources: [
                  { serviceAccountToken: { audience: 'sts.amazonaws.com', expirationSeconds: 86400, path: 'token' } },
                ],
              },
            }),
      },
    ];
  if (r.chance(0.1)) spec.nodeSelector = { 'kubernetes.io/os': 'windows' };
  if (r.chance(0.05))
    (spec as Record<string, unknown>).containers = r.pick([null, 'x', [{}], [{ name: 1 }], [{ name: 'a', env: 'x' }]]);
  const pod: Pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'team-a' }, spec };
  if (Object.keys(annotations).length) pod.metadata!.annotations = annotations;
  if (Object.keys(labels).length) pod.metadata!.labels = labels;
  return pod;
}

function randomServiceAccount(r: Rng): ServiceAccountView | undefined {
  if (r.chance(0.1)) return undefined;
  const annotations: Record<string, string> = {};
  // Mostly the well-formed value, so that injections happen; sometimes any of the others.
  for (const [key, values] of Object.entries(SA_VALUES))
    if (r.chance(0.35)) annotations[key] = r.chance(0.75) ? values[0] : r.pick(values);
  return { namespace: 'team-a', name: 'app', uid: 'u', annotations };
}

function request(object: unknown, extra: Partial<AdmissionRequest> = {}): AdmissionRequest {
  return {
    uid: 'u',
    kind: { group: '', version: 'v1', kind: 'Pod' },
    namespace: 'team-a',
    operation: 'CREATE',
    object,
    ...extra,
  };
}

/** Everything of `before` is still in `after`, but for the keys the webhook owns. */
function assertKept(before: Pod, after: Pod, context: string): void {
  const owned = new Set([
    INJECTED_ANNOTATION,
    'cloud.google.com/external-credentials-json',
    'workload-identity-webhook.io/aws-config-file',
    'workload-identity-webhook.io/gcp-credentials-b',
  ]);
  for (const [k, v] of Object.entries(before.metadata?.annotations ?? {}))
    if (!owned.has(k)) assert.equal(after.metadata?.annotations?.[k], v, `${context}: annotation ${k}`);
  assert.deepEqual(after.metadata?.labels, before.metadata?.labels, `${context}: labels`);
  for (const field of ['containers', 'initContainers'] as const) {
    const b = before.spec?.[field] ?? [];
    let a = after.spec?.[field] ?? [];
    // The pfnet dialect's gcloud setup container goes first; it is the webhook's own.
    if (field === 'initContainers' && a[0]?.name === 'gcloud-setup' && b[0]?.name !== 'gcloud-setup') a = a.slice(1);
    assert.equal(a.length, b.length, `${context}: ${field} count`);
    b.forEach((c, i) => {
      const { env: be, volumeMounts: bm, ...rest } = c;
      const { env: ae, volumeMounts: am, ...restAfter } = a[i];
      assert.deepEqual(restAfter, rest, `${context}: ${field}[${i}] fields besides env and mounts`);
      for (const e of be ?? [])
        assert.ok(
          (ae ?? []).some((x) => JSON.stringify(x) === JSON.stringify(e)),
          `${context}: ${field}[${i}] env ${e.name} kept`,
        );
      for (const m of bm ?? [])
        assert.ok(
          (am ?? []).some((x) => JSON.stringify(x) === JSON.stringify(m)),
          `${context}: ${field}[${i}] mount ${m.name} kept`,
        );
    });
  }
  for (const v of before.spec?.volumes ?? [])
    assert.ok(
      after.spec?.volumes?.some((x) => JSON.stringify(x) === JSON.stringify(v)),
      `${context}: volume ${v.name} kept`,
    );
}

function applied(pod: unknown, decision: Decision, context: string): Pod {
  try {
    return fastJsonPatch.applyPatch(
      structuredClone(pod),
      (decision.patch ?? []) as fastJsonPatch.Operation[],
      true,
      false,
    ).newDocument as Pod;
  } catch (err) {
    return assert.fail(
      `${context}: the patch does not apply: ${(err as Error).message}\n${JSON.stringify(decision.patch)}`,
    );
  }
}

describe('fuzz', () => {
  test(`${RUNS} random Pods and ServiceAccounts: no exception, patches apply, nothing of the user's is lost, idempotent`, async () => {
    const p = providers({ 'azure-tenant-id': TENANT });
    const recordKeys = RecordKeys.random();
    let mutated = 0;
    for (let run = 0; run < RUNS; run++) {
      const seed = BASE_SEED + run;
      const r = rng(seed);
      const pod = randomPod(r);
      const sa = randomServiceAccount(r);
      const context = `seed ${seed}`;
      let decision: Decision;
      try {
        decision = await admitPod(p, () => sa, request(pod), undefined, { recordKeys, maxContainers: 500 });
      } catch (err) {
        return assert.fail(
          `${context}: admitPod threw ${(err as Error).stack}\npod: ${JSON.stringify(pod)}\nsa: ${JSON.stringify(sa)}`,
        );
      }
      if (!decision.allowed) {
        assert.ok(decision.denial && decision.denial.message.length > 0, `${context}: a denial has a message`);
        assert.notEqual(decision.denial!.reason, 'InternalError', context);
        continue;
      }
      const out = applied(pod, decision, context);
      if (!Array.isArray(pod.spec?.containers)) continue;
      assertKept(pod, out, context);
      if (decision.patch?.length) mutated++;
      const again = await admitPod(p, () => sa, request(out), undefined, { recordKeys, maxContainers: 500 });
      assert.ok(again.allowed, `${context}: its own output is admitted again`);
      assert.deepEqual(again.patch ?? [], [], `${context}: a second run changes nothing`);
    }
    assert.ok(mutated > RUNS / 10, `the generator reaches injections (${mutated} of ${RUNS})`);
  });

  test(`${RUNS} random AdmissionReview envelopes: parsed or refused with WIW_BAD_ADMISSION_REVIEW, never a TypeError`, () => {
    const values = [undefined, null, 0, 1, '', 'x', true, [], {}, [1], { kind: 'Pod' }];
    for (let run = 0; run < RUNS; run++) {
      const r = rng(BASE_SEED * 7 + run);
      const body: Record<string, unknown> = {
        apiVersion: r.pick(['admission.k8s.io/v1', 'admission.k8s.io/v1beta1', 'v1', undefined]),
        kind: r.pick(['AdmissionReview', 'Pod', undefined]),
      };
      if (r.chance(0.9)) {
        const req: Record<string, unknown> = {
          uid: r.pick(['u', '', 7, undefined]),
          kind: r.pick([{ group: '', version: 'v1', kind: 'Pod' }, { kind: 'Pod' }, 'Pod', null]),
          operation: r.pick(['CREATE', 'UPDATE', 'PATCH', undefined]),
        };
        for (const key of ['namespace', 'object', 'oldObject', 'name', 'dryRun'])
          if (r.chance(0.5)) req[key] = r.pick(values);
        body.request = r.chance(0.95) ? req : r.pick(values);
      }
      try {
        parseAdmissionReview(r.chance(0.05) ? r.pick(values) : body);
      } catch (err) {
        assert.ok(
          err instanceof WebhookError && err.code === 'WIW_BAD_ADMISSION_REVIEW',
          `run ${run}: ${(err as Error).stack}`,
        );
      }
    }
  });

  test(`${RUNS} random labelled Secrets: no exception, derived keys only, token and config kept byte for byte`, async () => {
    const c = config({});
    const core = { providers: createSecretProviders(c), defaultTokenPath: c.secretTokenPath };
    const configs: Record<string, unknown[]> = {
      aws: [
        { roleARN: ROLE_ARN },
        { roleARN: 'x' },
        { roleArn: ROLE_ARN },
        'roleARN: [',
        '{}',
        'a: &a [1]\nb: *a',
        { roleARN: ROLE_ARN, region: 'eu-west-1' },
        null,
        42,
      ],
      azure: [{ clientID: CLIENT, tenantID: TENANT, subscriptionID: TENANT }, { clientID: 'x' }, '', []],
      gcp: [
        {
          projectID: 'p',
          credentialsConfig: {
            type: 'external_account',
            audience: GCP_AUDIENCE,
            subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
            token_url: 'https://sts.googleapis.com/v1/token',
          },
        },
        { credentialsConfig: 'x' },
        { credentialsConfig: { type: 'service_account' } },
      ],
    };
    for (let run = 0; run < RUNS; run++) {
      const r = rng(BASE_SEED * 13 + run);
      const provider = r.pick(['aws', 'azure', 'gcp', 'oracle', '']);
      const cfg = r.pick(configs[provider] ?? [{}]);
      const data: Record<string, string> = {};
      if (cfg !== null) data.config = b64(typeof cfg === 'string' ? cfg : JSON.stringify(cfg));
      if (r.chance(0.5)) data.token = b64('eyJhbGciOiJSUzI1NiJ9.e30.c2ln');
      if (r.chance(0.3)) data.other = b64(randomString(r));
      const secret: Secret = {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name: 's',
          namespace: 'team-a',
          labels: r.chance(0.7)
            ? { 'workload-identity-webhook.io/provider': provider }
            : {
                'security.gardener.cloud/purpose': 'workload-identity-token-requestor',
                'workloadidentity.security.gardener.cloud/provider': provider,
              },
          annotations: {
            'workload-identity-webhook.io/service-account': r.pick(['app', 'other/app', '', 'a/b/c', '../x']),
          },
        },
        data,
      };
      const operation = r.pick(['CREATE', 'UPDATE'] as const);
      const context = `seed ${BASE_SEED * 13 + run}`;
      let decision: Decision;
      try {
        decision = await admitSecret(
          core,
          () => undefined,
          request(secret, {
            kind: { group: '', version: 'v1', kind: 'Secret' },
            operation,
            oldObject: operation === 'UPDATE' ? secret : undefined,
          }),
        );
      } catch (err) {
        return assert.fail(`${context}: admitSecret threw ${(err as Error).stack}\n${JSON.stringify(secret)}`);
      }
      if (!decision.allowed) {
        assert.notEqual(decision.denial?.reason, 'InternalError', `${context}: ${decision.denial?.message}`);
        continue;
      }
      const out = applied(secret, decision, context) as unknown as Secret;
      for (const [k, v] of Object.entries(data))
        assert.equal(out.data?.[k], v, `${context}: data.${k} kept byte for byte`);
    }
  });
});

// Each cause the HTTPS fuzz (test/e2e/fuzz-serve.test.ts) found, reproduced on its own.
describe('what the fuzz found', () => {
  const p = providers({ 'azure-tenant-id': TENANT });
  const recordKeys = RecordKeys.random();
  const admit = (object: unknown, sa: ServiceAccountView | undefined) =>
    admitPod(p, () => sa, request(object), undefined, { recordKeys, maxContainers: 500 });
  const aws: ServiceAccountView = {
    namespace: 'team-a',
    name: 'app',
    uid: 'u',
    annotations: { 'eks.amazonaws.com/role-arn': ROLE_ARN },
  };
  const azure: ServiceAccountView = {
    namespace: 'team-a',
    name: 'other',
    uid: 'u',
    annotations: { 'azure.workload.identity/client-id': CLIENT },
  };

  /** A Pod as the webhook left it for `aws`, now named for another ServiceAccount: a reinvocation. */
  async function reinvoked(): Promise<Pod> {
    const first = await admit(examplePod({ labels: { 'azure.workload.identity/use': 'true' } }), aws);
    const out = apply(examplePod({ labels: { 'azure.workload.identity/use': 'true' } }), first.patch!);
    out.spec!.serviceAccountName = 'other';
    return out;
  }

  test('a value of the wrong type where the core reads a string is refused as malformed, not an internal error', async () => {
    const cases: [string, (pod: Pod) => void][] = [
      ['env value', (pod) => ((pod.spec!.containers![0].env![0] as { value: unknown }).value = [[]])],
      ['annotation value', (pod) => ((pod.metadata!.annotations as Record<string, unknown>)['example.com/x'] = {})],
      ['label value', (pod) => ((pod.metadata!.labels as Record<string, unknown>)['example.com/x'] = 1)],
    ];
    for (const [what, edit] of cases) {
      const pod = await reinvoked();
      edit(pod);
      const decision = await admit(pod, azure);
      assert.equal(decision.allowed, false, what);
      assert.equal(decision.denial?.reason, 'MalformedObject', what);
      assert.match(decision.denial!.message, /is not a string/, what);
    }
  });

  test('metadata.annotations or labels that are not maps are refused, not answered with a patch that cannot apply', async () => {
    for (const [field, value] of [
      ['annotations', ['{"v":2}']],
      ['annotations', 'a\nb'],
      ['labels', 'x'],
      ['annotations', null],
    ] as const) {
      const pod = examplePod({ labels: { 'azure.workload.identity/use': 'true' } }) as Record<string, any>;
      pod.metadata[field] = value;
      const decision = await admit(pod, azure);
      assert.equal(decision.denial?.reason, 'MalformedObject', `${field}: ${JSON.stringify(value)}`);
      assert.match(decision.denial!.message, new RegExp(`metadata.${field} is not a map of strings`));
    }
  });

  test('a Pod without a spec is refused, not answered with a patch that adds to /spec', async () => {
    const decision = await admit({ metadata: { name: 'p', labels: { 'azure.workload.identity/use': 'true' } } }, azure);
    assert.equal(decision.denial?.reason, 'MalformedObject');
    assert.match(decision.denial!.message, /spec is missing/);
  });

  test('setMembers adds a member whose name an object inherits (constructor, toString): a replace would not apply', () => {
    const ops: PatchOperation[] = [];
    const existing = { a: '1' };
    setMembers(ops, '/metadata/annotations', existing, { constructor: 'x', toString: 'y', a: '2' });
    assert.deepEqual(ops, [
      { op: 'add', path: '/metadata/annotations/constructor', value: 'x' },
      { op: 'add', path: '/metadata/annotations/toString', value: 'y' },
      { op: 'replace', path: '/metadata/annotations/a', value: '2' },
    ]);
    apply({ metadata: { annotations: existing } } as Pod, ops);
  });
});
