// node bench/secret.ts: the cost of the Secret core (pure, no server) per provider, for a CREATE
// and for the UPDATE a token renewal makes (new token, same config); then the admission handler
// for that UPDATE with a cross-namespace reference (a cached ServiceAccount, the grant checked).
import { admitSecret } from '../src/admission/secrets.ts';
import type { AdmissionRequest } from '../src/admission/review.ts';
import { loadConfig } from '../src/config.ts';
import { mutateSecret } from '../src/mutate/secret.ts';
import { createSecretProviders } from '../src/clouds/index.ts';
import { applySecretPatch, b64, labelledSecret } from '../test/support/secrets.ts';

const config = loadConfig(new Map(), {});
const core = { providers: createSecretProviders(config), defaultTokenPath: config.secretTokenPath };
const N = 20_000;

function measure(run: () => unknown): { p50: number; p99: number } {
  for (let i = 0; i < 2_000; i++) run();
  const samples = new Float64Array(N);
  for (let i = 0; i < N; i++) {
    const t = process.hrtime.bigint();
    run();
    samples[i] = Number(process.hrtime.bigint() - t) / 1000;
  }
  samples.sort();
  return { p50: samples[Math.floor(N * 0.5)], p99: samples[Math.floor(N * 0.99)] };
}

async function measureAsync(run: () => Promise<unknown>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < 2_000; i++) await run();
  const samples = new Float64Array(N);
  for (let i = 0; i < N; i++) {
    const t = process.hrtime.bigint();
    await run();
    samples[i] = Number(process.hrtime.bigint() - t) / 1000;
  }
  samples.sort();
  return { p50: samples[Math.floor(N * 0.5)], p99: samples[Math.floor(N * 0.99)] };
}

const us = (v: number) => `${v.toFixed(1).padStart(6)} µs`;
console.log(`Secret core, ${N} runs each (p50 / p99)`);
for (const provider of ['aws', 'azure', 'gcp']) {
  const secret = labelledSecret(provider, { data: { token: 'eyJhbGciOiJSUzI1NiJ9.e30.c2ln' } });
  const created = mutateSecret(core, { secret, namespace: 'team-a' });
  if (!created.allowed) throw new Error(created.denial.message);
  const stored = applySecretPatch(secret, created.patch);
  // A token writer replaces the data: new token, same config, derived keys dropped.
  const renewed = { ...stored, data: { config: stored.data!.config, token: b64('eyJhbGciOiJSUzI1NiJ9.e30.bmV3') } };
  const c = measure(() => mutateSecret(core, { secret, namespace: 'team-a' }));
  const u = measure(() => mutateSecret(core, { secret: renewed, oldSecret: stored, namespace: 'team-a' }));
  console.log(
    `${provider.padEnd(6)} CREATE ${us(c.p50)} / ${us(c.p99)}   token renewal UPDATE ${us(u.p50)} / ${us(u.p99)}`,
  );
}

// The admission handler: shape checks, the reference, the cached target ServiceAccount, the core.
const granted = { 'workload-identity-webhook.io/allowed-referrer-namespaces': 'team-a' };
const target = { namespace: 'team-b', name: 'shared', uid: 'u', annotations: granted };
const lookup = () => target;
console.log(`Secret admission (admitSecret), ${N} runs each (p50 / p99)`);
for (const provider of ['aws', 'azure', 'gcp']) {
  const secret = labelledSecret(provider, {
    serviceAccount: 'team-b/shared',
    data: { token: 'eyJhbGciOiJSUzI1NiJ9.e30.c2ln' },
  });
  const created = mutateSecret(core, { secret, namespace: 'team-a', referencedServiceAccount: target });
  if (!created.allowed) throw new Error(created.denial.message);
  const stored = applySecretPatch(secret, created.patch);
  const renewed = { ...stored, data: { config: stored.data!.config, token: b64('eyJhbGciOiJSUzI1NiJ9.e30.bmV3') } };
  const request: AdmissionRequest = {
    uid: 'bench',
    kind: { group: '', version: 'v1', kind: 'Secret' },
    namespace: 'team-a',
    operation: 'UPDATE',
    object: renewed,
    oldObject: stored,
  };
  const first = await admitSecret(core, lookup, request);
  if (!first.allowed) throw new Error(first.denial?.message);
  const u = await measureAsync(async () => admitSecret(core, lookup, request));
  console.log(`${provider.padEnd(6)} cross-namespace token renewal UPDATE ${us(u.p50)} / ${us(u.p99)}`);
}
