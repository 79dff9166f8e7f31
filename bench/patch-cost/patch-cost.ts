// The `patch` phase of bench/apiserver.ts: what kube-apiserver pays to apply serve's JSON Patch,
// against the same Pod as one whole-array replacement of /spec/containers (and initContainers), the
// shape the AWS peer answers with. Timed by main.go (built by provide.sh against the
// gopkg.in/evanphx/json-patch.v4 that k8s.io/apiserver pins), pinned to one CPU; serve's patch is
// computed here by the core (src/admission/pods.ts admitPod) for each Pod as kube-apiserver
// hands it to a webhook: the object a dry-run create answers with when no webhook is registered.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ControlPlane } from '../../test/harness/control-plane.ts';
import { admitPod, type ServiceAccountLookup } from '../../src/admission/pods.ts';
import type { AdmissionRequest } from '../../src/admission/review.ts';
import type { PodProvider } from '../../src/clouds/types.ts';
import type { PodToCreate } from '../support/apiserver.ts';
import { podReview } from '../support/reviews.ts';

export interface PatchCost {
  pods: number;
  same: number;
  rounds: number;
  serveUs: number;
  wholeUs: number;
  serveOps: number;
  wholeOps: number;
  serveBytes: number;
  wholeBytes: number;
}

export interface PatchTool {
  binary: string;
  /** gopkg.in/evanphx/json-patch.v4's version, and the k8s.io/apiserver that pins it. */
  jsonPatch: string;
  apiserver: string;
}

/** Builds main.go once (bench/patch-cost/provide.sh, locked, cached) and names what it built against. */
export function providePatchCost(): PatchTool {
  const out = execFileSync('bash', [join(import.meta.dirname, 'provide.sh')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  }).toString();
  const get = (name: string) => {
    const value = new RegExp(`^${name}=(\\S+)$`, 'm').exec(out)?.[1];
    if (!value) throw new Error(`bench/patch-cost/provide.sh printed no ${name}:\n${out}`);
    return value;
  };
  return {
    binary: get('PATCH_COST'),
    jsonPatch: get('JSON_PATCH_VERSION'),
    apiserver: get('APISERVER_MODULE_VERSION'),
  };
}

export interface PatchCase {
  name: string;
  /** The Pod as kube-apiserver encodes it (raw JSON). */
  pod: string;
  patch: unknown[];
}

/**
 * Serve's patch for each Pod as kube-apiserver hands it over (a dry-run create with no webhook
 * registered answers with it, defaulted). Pods serve leaves alone are left out.
 */
export async function patchCases(
  cp: ControlPlane,
  pods: PodToCreate[],
  providers: readonly PodProvider[],
  lookup: ServiceAccountLookup,
): Promise<{ cases: PatchCase[]; unpatched: number }> {
  const cases: PatchCase[] = [];
  let unpatched = 0;
  for (const [i, { namespace, body }] of pods.entries()) {
    const r = await cp.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, JSON.parse(`${body}`));
    if (r.status !== 201) throw new Error(`dry-run create in ${namespace}: HTTP ${r.status} ${r.body.slice(0, 300)}`);
    const object = JSON.parse(r.body) as { metadata: { name: string } };
    const review = JSON.parse(
      `${podReview(object, namespace, `00000000-0000-0000-0002-${String(i).padStart(12, '0')}`)}`,
    );
    const decision = await admitPod(providers, lookup, review.request as AdmissionRequest);
    if (!decision.allowed)
      throw new Error(`serve refuses ${namespace}/${object.metadata.name}: ${JSON.stringify(decision.denial)}`);
    if (!decision.patch?.length) unpatched++;
    else cases.push({ name: `${namespace}/${object.metadata.name}`, pod: r.body, patch: decision.patch });
  }
  return { cases, unpatched };
}

/** Times both patches of every case, `rounds` times, on `cpu` alone (taskset, GOMAXPROCS=1). */
export function runPatchCost(tool: PatchTool, cases: PatchCase[], rounds: number, cpu: string): PatchCost {
  if (!cases.length) throw new Error('the patch phase has no Pod serve patches');
  const dir = mkdtempSync(join(tmpdir(), 'patch-cost-'));
  try {
    const file = join(dir, 'cases.json');
    // The Pods go in as kube-apiserver wrote them: raw, never through JavaScript numbers.
    writeFileSync(
      file,
      `[${cases.map((c) => `{"name":${JSON.stringify(c.name)},"pod":${c.pod},"patch":${JSON.stringify(c.patch)}}`).join(',')}]`,
    );
    const out = execFileSync('taskset', ['-c', cpu, tool.binary, file, String(rounds)], {
      env: { ...process.env, GOMAXPROCS: '1' },
      stdio: ['ignore', 'pipe', 'inherit'],
    }).toString();
    return JSON.parse(out) as PatchCost;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
