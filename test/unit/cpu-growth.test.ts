// Issue 28, finding 3: linear work on every list that comes from input. role-arns deduplication was
// quadratic (6,600 profiles cost 0.7 to 1.4 s of the event loop per review). Each list a review
// carries, in the Pod or in its ServiceAccount, is grown tenfold here, and the CPU per review,
// whole (the HTTP face in-process: JSON parse, shape check, providers, plan, patch, answer), must
// grow about tenfold at most: under 30x, where quadratic work gives 100x. A list over a bound is
// refused, which costs as little as its size; either way the process never pays more.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/http/app.ts';
import { admitPod } from '../../src/admission/pods.ts';
import type { ServiceAccountView } from '../../src/kube/types.ts';
import { createMetrics } from '../../src/metrics.ts';
import { INJECTED_ANNOTATION } from '../../src/mutate/injection-record.ts';
import { pod, providers, sa } from '../support/builders.ts';
import { CLIENT, GCP_EMAIL, roleArn, TENANT, WIF_PROVIDER } from '../support/identities.ts';

let app: FastifyInstance;
let account: ServiceAccountView;

before(async () => {
  const p = providers();
  app = buildApp({
    https: null,
    log: pino({ level: 'silent' }),
    metrics: createMetrics(),
    admit: (request) => admitPod(p, () => account, request, undefined, { maxContainers: 500 }),
    isReady: () => true,
  });
  await app.ready();
});
after(() => app.close());

/** One review: a ServiceAccount and a Pod of the named size. */
interface Sized {
  annotations: Record<string, string>;
  pod: ReturnType<typeof pod>;
}

function body(p: Sized['pod']): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'u',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace: 'team-a',
      operation: 'CREATE',
      object: p,
    },
  });
}

/** A review ready to send: its ServiceAccount and its body. */
async function prepared(input: Sized): Promise<{ account: ServiceAccountView; payload: string }> {
  const ready = { account: sa(input.annotations), payload: body(input.pod) };
  account = ready.account;
  const answer = await app.inject({ method: 'POST', url: '/mutate', payload: ready.payload, headers: JSON_TYPE });
  assert.equal(answer.statusCode, 200, answer.body.slice(0, 300));
  return ready;
}
const JSON_TYPE = { 'content-type': 'application/json' };

/** CPU microseconds per review over `reps` reviews. */
async function cpuPerReview(review: { account: ServiceAccountView; payload: string }, reps: number): Promise<number> {
  account = review.account;
  const start = process.cpuUsage();
  for (let i = 0; i < reps; i++)
    await app.inject({ method: 'POST', url: '/mutate', payload: review.payload, headers: JSON_TYPE });
  const used = process.cpuUsage(start);
  return (used.user + used.system) / reps;
}

const AWS = { 'eks.amazonaws.com/role-arn': roleArn('base') };
const AZURE_LABEL = { 'azure.workload.identity/use': 'true' };
const AZURE = { 'azure.workload.identity/client-id': CLIENT, 'azure.workload.identity/tenant-id': TENANT };
const GCP = {
  'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
  'cloud.google.com/service-account-email': GCP_EMAIL,
  'cloud.google.com/injection-mode': 'direct',
};
const names = (n: number, prefix = 'c') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
const containers = (n: number, extra: Record<string, unknown> = {}) =>
  names(n).map((name) => ({ name, image: 'busybox', ...extra }));

/** Every list that comes from input, as a review of `n` entries. */
const INPUTS: Record<string, { base: number; reps: number; make: (n: number) => Sized }> = {
  'role-arns profiles': {
    base: 400,
    reps: 20,
    make: (n) => ({
      annotations: {
        'eks.amazonaws.com/role-arns': names(n, 'p')
          .map((p, i) => `${p}=${roleArn(`r${i}`)}`)
          .join(','),
      },
      pod: pod(),
    }),
  },
  'Azure container client ids': {
    base: 400,
    reps: 20,
    make: (n) => ({
      annotations: {
        ...AZURE,
        'azure.workload.identity/container-client-ids': names(n)
          .map((c) => `${c}=${CLIENT}`)
          .join(';'),
      },
      pod: pod({ labels: AZURE_LABEL }),
    }),
  },
  'AWS container profiles, over as many containers': {
    // 6 → 60: within the 64 a list may have, so the work itself is measured, not a refusal.
    base: 6,
    reps: 10,
    make: (n) => ({
      annotations: {
        'eks.amazonaws.com/role-arns': `writer=${roleArn('writer')}`,
        'eks.amazonaws.com/container-profiles': names(n)
          .map((c) => `${c}=writer`)
          .join(','),
      },
      pod: pod({ spec: { containers: containers(n) } }),
    }),
  },
  'GCP named providers': {
    base: 400,
    reps: 20,
    make: (n) => ({
      annotations: {
        ...GCP,
        'cloud.google.com/workload-identity-providers': names(n, 'p')
          .map((p) => `${p}=${WIF_PROVIDER}`)
          .join(','),
      },
      pod: pod(),
    }),
  },
  'skip-containers of the three clouds': {
    base: 400,
    reps: 20,
    make: (n) => ({
      annotations: { ...AWS, ...AZURE, ...GCP },
      pod: pod({
        labels: AZURE_LABEL,
        annotations: {
          'eks.amazonaws.com/skip-containers': names(n).join(','),
          'azure.workload.identity/skip-containers': names(n).join(';'),
          'cloud.google.com/skip-containers': names(n).join(','),
        },
      }),
    }),
  },
  'include-containers of the three clouds, over as many containers': {
    // 6 → 60: within the 64 a list may have, so the work itself is measured, not a refusal.
    base: 6,
    reps: 10,
    make: (n) => ({
      annotations: { ...AWS, ...AZURE, ...GCP },
      pod: pod({
        labels: AZURE_LABEL,
        annotations: {
          'eks.amazonaws.com/include-containers': names(n).join(','),
          'azure.workload.identity/include-containers': names(n).join(';'),
          'cloud.google.com/include-containers': names(n).join(','),
        },
        spec: { containers: containers(n) },
      }),
    }),
  },
  'containers, three clouds': {
    base: 40,
    reps: 10,
    make: (n) => ({
      annotations: { ...AWS, ...AZURE, ...GCP },
      pod: pod({ labels: AZURE_LABEL, spec: { containers: containers(n) } }),
    }),
  },
  'env of a container': {
    base: 300,
    reps: 20,
    make: (n) => ({
      annotations: { ...AWS, ...AZURE, ...GCP },
      pod: pod({
        labels: AZURE_LABEL,
        spec: {
          containers: [{ name: 'app', image: 'busybox', env: names(n, 'V').map((name) => ({ name, value: 'x' })) }],
        },
      }),
    }),
  },
  'volumes and mounts': {
    base: 300,
    reps: 20,
    make: (n) => ({
      annotations: { ...AWS, ...AZURE, ...GCP },
      pod: pod({
        labels: AZURE_LABEL,
        spec: {
          volumes: names(n, 'v').map((name) => ({ name, emptyDir: {} })),
          containers: [
            {
              name: 'app',
              image: 'busybox',
              volumeMounts: names(n, 'v').map((name) => ({ name, mountPath: `/m/${name}` })),
            },
          ],
        },
      }),
    }),
  },
  'Pod annotations': {
    base: 300,
    reps: 20,
    make: (n) => ({
      annotations: { ...AWS, ...AZURE, ...GCP },
      pod: pod({ labels: AZURE_LABEL, annotations: Object.fromEntries(names(n, 'a').map((k) => [`x/${k}`, 'v'])) }),
    }),
  },
  'entries of a forged injection record': {
    base: 300,
    reps: 20,
    make: (n) => ({
      annotations: AWS,
      pod: pod({
        annotations: {
          [INJECTED_ANNOTATION]: JSON.stringify({
            v: 2,
            sa: 'other',
            env: names(n, 'E').map((e) => [e, 'AAAAAAAAAAAAAAAA']),
            vol: [],
            ann: [],
            keep: names(n).map((c) => [c, 'AWS_ROLE_ARN']),
            mac: 'forged',
          }),
        },
      }),
    }),
  },
};

describe('CPU per review grows about as the input, never as its square (issue 28, finding 3)', () => {
  for (const [what, { base, reps, make }] of Object.entries(INPUTS)) {
    test(what, async (t) => {
      const [smallReview, largeReview] = [await prepared(make(base)), await prepared(make(base * 10))];
      // Rounds alternate, and each size keeps its least: the machine is shared.
      let [small, large] = [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY];
      for (let round = 0; round < 3; round++) {
        small = Math.min(small, await cpuPerReview(smallReview, reps));
        large = Math.min(large, await cpuPerReview(largeReview, Math.max(2, Math.ceil(reps / 5))));
      }
      const ratio = large / small;
      const figures = `${base} → ${base * 10}: ${small.toFixed(0)} → ${large.toFixed(0)} µs of CPU per review (${ratio.toFixed(1)}x)`;
      t.diagnostic(figures);
      assert.ok(ratio < 30, figures);
    });
  }
});
