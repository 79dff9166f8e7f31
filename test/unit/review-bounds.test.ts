// Issue 28: a size for everything a review reads, and no patch kube-apiserver would refuse. Every
// review goes through the HTTP face in-process, as kube-apiserver sends it, at the API server's own
// maxima: the longest names, 256 KiB of annotations, a 3 MiB request. What a legitimate Pod can be
// is admitted; one past a bound is refused with the field and the bound named; and no answer takes
// a Pod's annotations past the 256 KiB kube-apiserver stores (finding 8: role-arns of 1,737
// profiles or more did).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/http/app.ts';
import { admitPod } from '../../src/admission/pods.ts';
import { admitSecret } from '../../src/admission/secrets.ts';
import { createSecretProviders } from '../../src/clouds/index.ts';
import type { Pod, Secret, ServiceAccountView } from '../../src/kube/types.ts';
import { createMetrics } from '../../src/metrics.ts';
import { apply, config, pod, providers, sa } from '../support/builders.ts';
import { awsConfig, labelledSecret } from '../support/secrets.ts';
import { podReview } from '../support/review-fuzz.ts';
import { CLIENT, GCP_EMAIL, roleArn, TENANT, WIF_PROVIDER } from '../support/identities.ts';

const all = providers();
let app: FastifyInstance;
let account: ServiceAccountView;

before(async () => {
  app = buildApp({
    https: null,
    log: pino({ level: 'silent' }),
    metrics: createMetrics(),
    admit: (request) => admitPod(all, (ns, name) => ({ ...account, namespace: ns, name }), request),
    isReady: () => true,
  });
  await app.ready();
});
after(() => app.close());

interface Answer {
  allowed: boolean;
  status?: { code: number; message: string; reason: string };
  patch?: string;
}

async function review(p: Pod, annotations: Record<string, string>): Promise<Answer> {
  account = sa(annotations);
  const payload = JSON.stringify(podReview(p, 'u', 'team-a'));
  const res = await app.inject({
    method: 'POST',
    url: '/mutate',
    payload,
    headers: { 'content-type': 'application/json' },
  });
  assert.equal(res.statusCode, 200, res.body.slice(0, 300));
  return res.json().response as Answer;
}

function patched(p: Pod, answer: Answer): Pod {
  assert.ok(answer.allowed, answer.status?.message);
  return answer.patch ? apply(p, JSON.parse(Buffer.from(answer.patch, 'base64').toString())) : p;
}

function refused(answer: Answer, ...says: RegExp[]): void {
  assert.equal(answer.allowed, false, 'refused');
  for (const s of says) assert.match(answer.status!.message, s);
}

/** kube-apiserver's TotalAnnotationSizeLimitB, and its count: every key's and value's bytes. */
const MAX_ANNOTATIONS_BYTES = 256 * 1024;
const annotationsBytes = (a: Record<string, string> | undefined) =>
  Object.entries(a ?? {}).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(v), 0);

const AWS = { 'eks.amazonaws.com/role-arn': roleArn('app') };
const AZURE = { 'azure.workload.identity/client-id': CLIENT, 'azure.workload.identity/tenant-id': TENANT };
const AZURE_LABEL = { 'azure.workload.identity/use': 'true' };
const GCP = {
  'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
  'iam.gke.io/gcp-service-account': GCP_EMAIL,
};
const THREE = { ...AWS, ...AZURE, ...GCP };
/** Pod annotations of `bytes` bytes, keys and values, as kube-apiserver counts them. */
function filler(bytes: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; bytes > 0; i++) {
    const key = `example.com/f${i}`;
    const value = 'x'.repeat(Math.max(0, Math.min(60_000, bytes - key.length)));
    out[key] = value;
    bytes -= key.length + value.length;
  }
  return out;
}

describe("names at the API server's maxima (issue 28: a size for everything)", () => {
  test('63-character container and volume names and a 253-character ServiceAccount name are served', async () => {
    const label = 'c'.repeat(63);
    const p = pod({
      labels: AZURE_LABEL,
      spec: {
        serviceAccountName: 's'.repeat(253),
        volumes: [{ name: label, emptyDir: {} }],
        initContainers: [{ name: `i${label.slice(1)}`, image: 'busybox' }],
        containers: [{ name: label, image: 'busybox', volumeMounts: [{ name: label, mountPath: '/data' }] }],
      },
    });
    const out = patched(p, await review(p, THREE));
    assert.equal(
      out.spec!.containers![0].env!.find((e) => e.name === 'AWS_ROLE_ARN')?.value,
      AWS['eks.amazonaws.com/role-arn'],
    );
  });

  for (const [field, spec, says] of [
    ['spec.containers[0].name', { containers: [{ name: 'c'.repeat(64), image: 'busybox' }] }, /63 of a DNS-1123 label/],
    [
      'spec.initContainers[0].name',
      { initContainers: [{ name: 'c'.repeat(900_000), image: 'busybox' }] },
      /900000 characters long, more than the 63/,
    ],
    ['spec.volumes[0].name', { volumes: [{ name: 'v'.repeat(64), emptyDir: {} }] }, /63 of a DNS-1123 label/],
    [
      'spec.containers[0].volumeMounts[0].name',
      { containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'v'.repeat(64), mountPath: '/m' }] }] },
      /63 of a DNS-1123 label/,
    ],
    ['spec.serviceAccountName', { serviceAccountName: 's'.repeat(254) }, /253 of a DNS-1123 subdomain/],
    ['spec.ephemeralContainers[0].name', { ephemeralContainers: [{ name: 'e'.repeat(64) }] }, /63/],
  ] as const) {
    test(`${field} over its bound is refused, naming the field and the bound`, async () => {
      const answer = await review(pod({ labels: AZURE_LABEL, spec }), THREE);
      refused(answer, new RegExp(field.replace(/[[\].]/g, '\\$&')), says);
      assert.ok(answer.status!.message.length < 500, 'the message does not echo the value');
    });
  }
});

describe('annotations at 256 KiB', () => {
  test("a Pod with exactly kube-apiserver's 256 KiB of annotations and no identity is admitted unchanged", async () => {
    const p = pod({ annotations: filler(MAX_ANNOTATIONS_BYTES) });
    assert.equal(annotationsBytes(p.metadata!.annotations), MAX_ANNOTATIONS_BYTES);
    const answer = await review(p, {});
    assert.equal(answer.allowed, true);
    assert.equal(answer.patch, undefined);
  });

  test('one byte more is refused before any work, naming the bound', async () => {
    const answer = await review(pod({ annotations: filler(MAX_ANNOTATIONS_BYTES + 1) }), THREE);
    refused(answer, /metadata\.annotations hold 262145 bytes/, /262144/);
  });

  test("a patch that would take the Pod's annotations past 256 KiB is refused, naming what the webhook adds (finding 8)", async () => {
    // 64 profiles with the longest role paths IAM allows, and a Pod already near the limit.
    const profiles = Array.from({ length: 64 }, (_, i) => `p${i}=${roleArn(`${'path/'.repeat(100)}role-${i}`)}`);
    const p = pod({ annotations: filler(MAX_ANNOTATIONS_BYTES - 20_000) });
    const answer = await review(p, { 'eks.amazonaws.com/role-arns': profiles.join(',') });
    refused(
      answer,
      /workload-identity-webhook\.io\/aws-config-file \(\d+ bytes\)/,
      /more than the 262144 kube-apiserver stores/,
    );
  });

  test('no answer takes the annotations past 256 KiB, whatever the Pod holds already', async () => {
    const profiles = Array.from({ length: 64 }, (_, i) => `p${i}=${roleArn(`${'path/'.repeat(60)}role-${i}`)}`);
    const sa = { ...THREE, 'eks.amazonaws.com/role-arns': profiles.join(',') };
    const verdicts = new Set<string>();
    for (const own of [0, 100_000, 200_000, 240_000, 250_000, 260_000, MAX_ANNOTATIONS_BYTES]) {
      const p = pod({ labels: AZURE_LABEL, annotations: own ? filler(own) : undefined });
      const answer = await review(p, sa);
      verdicts.add(answer.allowed ? 'admitted' : answer.status!.reason);
      if (!answer.allowed) continue;
      const bytes = annotationsBytes(patched(p, answer).metadata!.annotations);
      assert.ok(bytes <= MAX_ANNOTATIONS_BYTES, `${own} bytes of its own: ${bytes} after the patch`);
    }
    assert.ok(verdicts.has('admitted') && verdicts.size > 1, [...verdicts].join(', '));
  });
});

describe('what the providers read of a Pod', () => {
  const skips = [
    ['eks.amazonaws.com/skip-containers', ','],
    ['azure.workload.identity/skip-containers', ';'],
    ['cloud.google.com/skip-containers', ','],
    ['eks.amazonaws.com/include-containers', ','],
    ['azure.workload.identity/include-containers', ';'],
    ['cloud.google.com/include-containers', ','],
  ] as const;
  for (const [key, separator] of skips) {
    test(`${key}: 64 names of 63 characters are read, 65 names are refused`, async () => {
      const names = (n: number) => Array.from({ length: n }, (_, i) => `c${i}`.padEnd(63, 'x'));
      const at = pod({ labels: AZURE_LABEL, annotations: { [key]: names(64).join(`${separator} `) } });
      assert.equal((await review(at, THREE)).allowed, true);
      const over = pod({ labels: AZURE_LABEL, annotations: { [key]: names(65).join(separator) } });
      refused(await review(over, THREE), new RegExp(key.replace(/[./]/g, '\\$&')), /65 entries, more than the 64/);
    });
  }

  for (const key of [
    'eks.amazonaws.com/token-expiration',
    'eks.amazonaws.com/region',
    'azure.workload.identity/service-account-token-expiration',
    'azure.workload.identity/inject-proxy-sidecar',
    'azure.workload.identity/proxy-sidecar-port',
    'cloud.google.com/token-expiration',
  ])
    test(`${key} of 257 characters is refused, naming the bound of 256`, async () => {
      const answer = await review(
        pod({ labels: AZURE_LABEL, annotations: { [key]: ' '.repeat(250) + '3600000' } }),
        THREE,
      );
      refused(answer, /257 characters long, more than the 256/);
    });

  test("a container's own credential variables: 4 KiB are read, a 3 MiB request's worth is refused by name", async () => {
    const at = pod({
      labels: AZURE_LABEL,
      spec: {
        containers: [{ name: 'app', image: 'busybox', env: [{ name: 'AWS_ROLE_ARN', value: 'a'.repeat(4096) }] }],
      },
    });
    assert.equal((await review(at, THREE)).allowed, true);
    for (const name of ['AWS_ROLE_ARN', 'AZURE_FEDERATED_TOKEN_FILE', 'GOOGLE_APPLICATION_CREDENTIALS']) {
      const over = pod({
        labels: AZURE_LABEL,
        spec: {
          containers: [{ name: 'app', image: 'busybox', env: [{ name, value: 'a'.repeat(3 * 1024 * 1024 - 4096) }] }],
        },
      });
      refused(
        await review(over, THREE),
        new RegExp(`spec\\.containers\\[0\\]\\.env\\[0\\] \\(${name}\\)`),
        /more than the 4096/,
      );
    }
  });

  test("a 3 MiB request of the Pod's own (an env value the webhook only carries) is served", async () => {
    const p = pod({
      spec: {
        containers: [
          { name: 'app', image: 'busybox', env: [{ name: 'BUNDLE', value: 'b'.repeat(3 * 1024 * 1024 - 4096) }] },
        ],
      },
    });
    patched(p, await review(p, AWS));
  });

  test('every Pod annotation a provider reads is one it declares, with its bound (the class: no unbounded read)', () => {
    const declared = new Set(all.flatMap((p) => p.podReads.annotations.map((a) => a.key)));
    const read = new Set<string>();
    const annotations = new Proxy({} as Record<string, string>, {
      get(target, key) {
        if (typeof key === 'string') read.add(key);
        return Reflect.get(target, key);
      },
      has(target, key) {
        if (typeof key === 'string') read.add(key);
        return Reflect.has(target, key);
      },
    });
    const watched = { ...pod({ labels: AZURE_LABEL }), metadata: { name: 'p', labels: AZURE_LABEL, annotations } };
    for (const accountAnnotations of [THREE, { ...THREE, 'cloud.google.com/injection-mode': 'gcloud' }])
      for (const provider of all)
        provider.resolvePod({
          pod: watched,
          namespace: 'team-a',
          serviceAccount: sa(accountAnnotations),
          windows: false,
        });
    assert.ok(read.size > 0, 'the providers read annotations');
    assert.deepEqual(
      [...read].filter((key) => !declared.has(key)),
      [],
    );
  });
});

describe("the ServiceAccount's list annotations", () => {
  const lists: [string, (n: number) => string, Record<string, string>][] = [
    [
      'eks.amazonaws.com/role-arns',
      (n) => Array.from({ length: n }, (_, i) => `p${i}=${roleArn(`r${i}`)}`).join(','),
      {},
    ],
    [
      'eks.amazonaws.com/container-profiles',
      (n) => Array.from({ length: n }, (_, i) => `c${i}=p${i}`).join(','),
      {
        'eks.amazonaws.com/role-arns': Array.from({ length: 64 }, (_, i) => `p${i}=${roleArn(`r${i}`)}`).join(','),
      },
    ],
    [
      'azure.workload.identity/container-client-ids',
      (n) => Array.from({ length: n }, (_, i) => `c${i}=${CLIENT}`).join(';'),
      AZURE,
    ],
    [
      'cloud.google.com/workload-identity-providers',
      (n) => Array.from({ length: n }, (_, i) => `p${i}=${WIF_PROVIDER}`).join(','),
      GCP,
    ],
  ];
  for (const [key, list, base] of lists)
    test(`${key}: 64 entries are served, 6,600 are refused with the bound named`, async () => {
      const p = pod({ labels: AZURE_LABEL });
      patched(p, await review(p, { ...base, [key]: list(64) }));
      refused(await review(p, { ...base, [key]: list(6600) }), /6600 entries, more than the 64/);
    });

  test('an entry longer than an IAM role ARN may be is refused, and the message clips it', async () => {
    const answer = await review(pod(), { 'eks.amazonaws.com/role-arns': `p=${roleArn('r'.repeat(200_000))}` });
    refused(answer, /more than the 2048 an entry may have/);
    assert.ok(answer.status!.message.length < 500);
  });
});

describe('what the Secret core reads', () => {
  const c = config();
  const core = { providers: createSecretProviders(c), defaultTokenPath: c.secretTokenPath };
  const lookup = (namespace: string, name: string) => sa({}, name, namespace);
  const admit = (secret: Secret) =>
    admitSecret(core, lookup, {
      uid: 'u',
      kind: { group: '', version: 'v1', kind: 'Secret' },
      namespace: 'team-a',
      operation: 'CREATE',
      object: secret,
    });

  test('a WorkloadIdentityConfig of 64 KiB is read; one larger is refused before it is parsed', async () => {
    const padded = (bytes: number) =>
      `${JSON.stringify(awsConfig)}${' '.repeat(bytes - JSON.stringify(awsConfig).length)}`;
    assert.equal((await admit(labelledSecret('aws', { config: padded(64 * 1024) }))).allowed, true);
    const over = await admit(labelledSecret('aws', { config: padded(3 * 1024 * 1024 - 8192) }));
    assert.equal(over.allowed, false);
    assert.match(over.denial!.message, /data\.config is \d+ characters of base64, more than the 87384 of 65536 bytes/);
  });

  for (const [key, max] of [
    ['workload-identity-webhook.io/service-account', 512],
    ['workload-identity-webhook.io/token-path', 1024],
  ] as const)
    test(`${key} over ${max} characters is refused with a message that does not echo it`, async () => {
      const value = `/${'a'.repeat(200_000)}`;
      const over = await admit(
        labelledSecret(
          'aws',
          key.endsWith('service-account') ? { serviceAccount: value } : { annotations: { [key]: value } },
        ),
      );
      assert.equal(over.allowed, false);
      assert.match(over.denial!.message, new RegExp(`more than the ${max}`));
      assert.ok(over.denial!.message.length < 500);
    });

  test("a label value over kube-apiserver's 63 characters is refused, for a Secret and for a Pod", async () => {
    const over = await admit(labelledSecret('aws', { labels: { 'example.com/x': 'v'.repeat(64) } }));
    assert.equal(over.allowed, false);
    assert.match(over.denial!.message, /metadata\.labels\["example\.com\/x"\] is 64 characters long, more than the 63/);
    const big = await admit(labelledSecret('x'.repeat(900_000)));
    assert.equal(big.allowed, false);
    assert.ok(big.denial!.message.length < 500, 'the provider label is not echoed');
    refused(await review(pod({ labels: { app: 'v'.repeat(64) } }), THREE), /metadata\.labels\["app"\]/, /63/);
  });
});

describe('answers that do not grow with the Pod', () => {
  test('500 containers that each conflict: the denial names five and counts the rest', async () => {
    const containers = Array.from({ length: 500 }, (_, i) => ({
      name: `c${i}`,
      image: 'busybox',
      volumeMounts: [{ name: 'mine', mountPath: '/var/run/secrets/eks.amazonaws.com/serviceaccount' }],
    }));
    const answer = await review(pod({ spec: { volumes: [{ name: 'mine', emptyDir: {} }], containers } }), AWS);
    refused(answer, /container "c4" already mounts/, /and 495 more like these/);
    assert.ok(answer.status!.message.length < 2000, `${answer.status!.message.length} characters`);
  });
});
