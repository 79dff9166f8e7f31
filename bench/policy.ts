// node bench/policy.ts: what tenant policy costs at admission. One run, the same Pods, measured
// alternately with no policy and with 50 policies loaded: the pure core (admitPod with a
// ServiceAccount and namespace already cached) and the server path (the fastify app, in-process
// through inject: JSON parse, admission, response; no TLS or network). Also the cost of one CEL
// evaluation and of compiling the 50 policies with their examples.
import { parseArgs } from 'node:util';
import pino from 'pino';
import { admitPod } from '../src/admission/pods.ts';
import type { AdmissionRequest } from '../src/admission/review.ts';
import { buildApp } from '../src/http/app.ts';
import { loadConfig } from '../src/config.ts';
import type { Pod, ServiceAccountView } from '../src/kube/types.ts';
import { createMetrics } from '../src/metrics.ts';
import { activation, compileExpression } from '../src/policy/cel.ts';
import { compilePolicy } from '../src/policy/compile.ts';
import { EMPTY_POLICY_SET, policySet } from '../src/policy/evaluate.ts';
import { judgesOf, staticPolicyGate, type PolicyGate } from '../src/policy/gate.ts';
import type { NamespaceView } from '../src/kube/types.ts';
import { exampleVariables } from '../src/policy/inputs.ts';
import type { CompiledPolicy } from '../src/policy/model.ts';
import { providerOptionsFromConfig } from '../src/clouds/index.ts';
import { createProviders } from '../src/clouds/index.ts';

const { values: opts } = parseArgs({
  options: { iterations: { type: 'string', default: '20000' }, policies: { type: 'string', default: '50' } },
});
const N = Number(opts.iterations);
const POLICIES = Number(opts.policies);

const config = loadConfig(new Map(), {});
const providers = createProviders(config);
const options = providerOptionsFromConfig(config);
const account = (i: number) => String(100000000000 + i);

/** Tenant i may use only its own account, named by a namespace label; every fifth also computes a region. */
function tenantPolicy(i: number): unknown {
  const ns = `tenant-${String(i).padStart(2, '0')}`;
  const spec: Record<string, unknown> = {
    validations: [
      {
        name: 'own-account',
        expression: `namespaceObject.metadata.name != '${ns}' || (identity.provider == 'aws' && ('aws-account.example.com/' + identity.account) in namespaceObject.metadata.labels)`,
        messageExpression: `'namespace ${ns} may not use AWS account ' + identity.account`,
        examples: [
          {
            name: 'own',
            namespaceObject: { metadata: { name: ns, labels: { [`aws-account.example.com/${account(i)}`]: 'true' } } },
            identity: { provider: 'aws', account: account(i) },
            expect: { allowed: true },
          },
          {
            name: 'other',
            namespaceObject: { metadata: { name: ns } },
            identity: { provider: 'aws', account: '999999999999' },
            expect: { allowed: false, message: `namespace ${ns} may not use AWS account 999999999999` },
          },
        ],
      },
    ],
  };
  if (i % 5 === 0) {
    spec.defaults = [
      {
        name: 'region',
        field: 'region',
        expression: `namespaceObject.metadata.name == '${ns}' && 'region' in namespaceObject.metadata.labels ? namespaceObject.metadata.labels.region : null`,
        examples: [
          {
            name: 'labelled',
            namespaceObject: { metadata: { name: ns, labels: { region: 'eu-west-1' } } },
            expect: { value: 'eu-west-1' },
          },
        ],
      },
    ];
  }
  if (i === 0) {
    spec.identityProviders = [
      { name: 'tenants', aws: { accountIds: Array.from({ length: POLICIES }, (_, j) => account(j)) } },
    ];
  }
  return spec;
}

const compileStart = process.hrtime.bigint();
const compiled: CompiledPolicy[] = [];
for (let i = 0; i < POLICIES; i++) {
  const r = compilePolicy({
    name: `tenant-${String(i).padStart(2, '0')}`,
    generation: 1,
    source: 'bench',
    spec: tenantPolicy(i),
  });
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  compiled.push(r.policy);
}
const compileMs = Number(process.hrtime.bigint() - compileStart) / 1e6;
const examples = compiled.reduce((n, p) => n + p.examples, 0);

// The judged Pod: tenant 07 uses its own account; every policy's validation runs for it.
const TENANT = 7;
const namespace: NamespaceView = {
  name: 'tenant-07',
  labels: { [`aws-account.example.com/${account(TENANT)}`]: 'true', 'kubernetes.io/metadata.name': 'tenant-07' },
};
const serviceAccount: ServiceAccountView = {
  namespace: namespace.name,
  name: 'app',
  uid: 'u',
  annotations: { 'eks.amazonaws.com/role-arn': `arn:aws:iam::${account(TENANT)}:role/app` },
};
const pod: Pod = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    generateName: 'app-',
    namespace: namespace.name,
    labels: { app: 'app', 'pod-template-hash': '5d8f7c9b4' },
  },
  spec: {
    serviceAccountName: 'app',
    containers: Array.from({ length: 3 }, (_, c) => ({
      name: `c${c}`,
      image: 'registry.example.com/app:1',
      env: [{ name: 'MODE', value: 'prod' }],
      volumeMounts: [{ name: 'config', mountPath: '/etc/app' }],
    })),
    volumes: [{ name: 'config', configMap: { name: 'app-config' } }],
  },
};
const request: AdmissionRequest = {
  uid: 'bench',
  kind: { group: '', version: 'v1', kind: 'Pod' },
  namespace: namespace.name,
  operation: 'CREATE',
  object: pod,
};
const lookup = () => serviceAccount;
const gates: Record<string, PolicyGate> = {
  none: staticPolicyGate(EMPTY_POLICY_SET, options, [namespace]),
  [`${POLICIES} policies`]: staticPolicyGate(policySet(compiled), options, [namespace]),
};

// Both must admit and mutate: the bench measures the allowed path, not a denial's shortcut.
for (const [name, gate] of Object.entries(gates)) {
  const d = await admitPod(providers, lookup, request, judgesOf(gate));
  if (!d.allowed || !d.patch?.length) throw new Error(`${name}: expected a mutation, got ${JSON.stringify(d)}`);
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

/** Runs `fn` n times per configuration, alternating configurations in batches so drift hits both alike. */
async function measure(n: number, fn: (gate: PolicyGate) => unknown): Promise<Record<string, Float64Array>> {
  const samples: Record<string, number[]> = Object.fromEntries(Object.keys(gates).map((k) => [k, []]));
  const batch = 500;
  for (let done = 0; done < n; done += batch) {
    for (const [name, gate] of Object.entries(gates)) {
      for (let i = 0; i < batch; i++) {
        const t = process.hrtime.bigint();
        await fn(gate);
        samples[name].push(Number(process.hrtime.bigint() - t) / 1000);
      }
    }
  }
  return Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, Float64Array.from(v).sort()]));
}

function line(what: string, results: Record<string, Float64Array>): void {
  const us = (v: number) => `${v.toFixed(1).padStart(6)} µs`;
  const parts = Object.entries(results).map(
    ([name, s]) => `${name}: p50 ${us(percentile(s, 0.5))}  p99 ${us(percentile(s, 0.99))}`,
  );
  console.log(`${what.padEnd(34)} ${parts.join('   |   ')}`);
}

console.log(
  `tenant policy bench: ${POLICIES} policies (${compiled.reduce((n, p) => n + p.validations.length, 0)} validations, ${compiled.reduce((n, p) => n + p.defaults.length, 0)} defaults, 1 with ${POLICIES} AWS accounts as identity providers)`,
);
console.log(
  `compile + run ${examples} examples: ${compileMs.toFixed(1)} ms (${(compileMs / POLICIES).toFixed(2)} ms per policy)`,
);

// One CEL evaluation, alone.
const program = compileExpression(
  "namespaceObject.metadata.name != 'tenant-01' || ('aws-account.example.com/' + identity.account) in namespaceObject.metadata.labels",
);
if ('error' in program) throw new Error(program.error);
const vars = activation(
  exampleVariables({
    namespaceObject: { metadata: { name: 'tenant-01', labels: namespace.labels } },
    identity: { provider: 'aws', account: account(1) },
  }),
);
for (let i = 0; i < 20000; i++) program.run(vars);
const evals = 100000;
const t0 = process.hrtime.bigint();
for (let i = 0; i < evals; i++) program.run(vars);
console.log(
  `one CEL validation (evaluate only): ${(Number(process.hrtime.bigint() - t0) / evals / 1000).toFixed(2)} µs`,
);

await measure(5000, (g) => admitPod(providers, lookup, request, judgesOf(g))); // warm-up
line(`core: admitPod, ${N} Pods each`, await measure(N, (g) => admitPod(providers, lookup, request, judgesOf(g))));

const log = pino({ level: 'silent' });
const body = JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request });
const apps = Object.fromEntries(
  Object.entries(gates).map(([name, gate]) => [
    name,
    buildApp({
      https: null,
      log,
      metrics: createMetrics(),
      admit: (r) => admitPod(providers, lookup, r, judgesOf(gate)),
      isReady: () => true,
    }),
  ]),
);
const inject = async (g: PolicyGate) => {
  const name = Object.keys(gates).find((k) => gates[k] === g)!;
  const res = await apps[name].inject({
    method: 'POST',
    url: '/mutate',
    payload: body,
    headers: { 'content-type': 'application/json' },
  });
  if (res.statusCode !== 200 || !res.json().response.allowed) throw new Error(`${name}: ${res.body}`);
};
const serverN = Math.max(2000, Math.floor(N / 4));
await measure(1000, inject); // warm-up
line(`server: POST /mutate, ${serverN} each`, await measure(serverN, inject));
await Promise.all(Object.values(apps).map((a) => a.close()));
