// Locates kube-apiserver, etcd and helm: from the TEST_ASSET_* variables the test runner sets,
// otherwise from scripts/provide-binaries.sh (which builds them once and caches them).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface Binaries {
  kubeApiserver: string;
  etcd: string;
  helm: string;
}

/**
 * Which kube-apiserver: `tested` is the suite's (K8S_VERSION of the script), `newest` the newest
 * served one (K8S_NEWEST_VERSION, TEST_ASSET_KUBE_APISERVER_NEWEST), where MutatingAdmissionPolicy
 * is v1, `oldest` the chart's floor (K8S_OLDEST_VERSION, TEST_ASSET_KUBE_APISERVER_OLDEST).
 */
export type KubeVersion = 'oldest' | 'tested' | 'newest';
export const KUBE_VERSIONS: readonly KubeVersion[] = ['oldest', 'tested', 'newest'];

/**
 * The version a control plane runs when its test names none: WIW_KUBE_VERSION (scripts/dev.sh
 * test runs the `versions` selection with oldest and newest), `tested` when unset.
 */
export function chosenKubeVersion(env: NodeJS.ProcessEnv = process.env): KubeVersion {
  const chosen = env.WIW_KUBE_VERSION;
  if (chosen === undefined || chosen === '') return 'tested';
  if ((KUBE_VERSIONS as readonly string[]).includes(chosen)) return chosen as KubeVersion;
  throw new Error(`WIW_KUBE_VERSION=${JSON.stringify(chosen)} is not one of ${KUBE_VERSIONS.join(', ')}`);
}

const ASSET: Record<KubeVersion, { env: string; printed: string; flag: string[] }> = {
  oldest: { env: 'TEST_ASSET_KUBE_APISERVER_OLDEST', printed: 'KUBE_APISERVER_OLDEST', flag: ['--oldest'] },
  tested: { env: 'TEST_ASSET_KUBE_APISERVER', printed: 'KUBE_APISERVER', flag: [] },
  newest: { env: 'TEST_ASSET_KUBE_APISERVER_NEWEST', printed: 'KUBE_APISERVER_NEWEST', flag: ['--newest'] },
};

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export async function resolveBinaries(version: KubeVersion = 'tested'): Promise<Binaries> {
  const { TEST_ASSET_ETCD: etcd, TEST_ASSET_HELM: helm } = process.env;
  const kubeApiserver = process.env[ASSET[version].env];
  if (kubeApiserver && etcd && helm) return { kubeApiserver, etcd, helm };
  return provide(version);
}

async function provide(version: KubeVersion): Promise<Binaries> {
  // The script honours the TEST_ASSET_* variables that are set and builds only the rest.
  // No timeout: a first build takes many minutes; its progress goes to our stderr.
  const script = spawn('bash', ['scripts/provide-binaries.sh', ...ASSET[version].flag], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  script.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  const code = await new Promise<number | null>((resolve, reject) => {
    script.on('error', reject);
    script.on('close', resolve);
  });
  if (code !== 0) throw new Error(`scripts/provide-binaries.sh failed (exit ${code}); see its messages above`);
  const vars: Record<string, string> = {};
  for (const line of stdout.split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line);
    // printf %q output: a plain path stays as is; otherwise undo backslash escapes.
    if (m) vars[m[1]] = m[2].replace(/\\(.)/g, '$1');
  }
  const { ETCD, HELM } = vars;
  const KUBE_APISERVER = vars[ASSET[version].printed];
  if (!KUBE_APISERVER || !ETCD || !HELM) {
    throw new Error(`scripts/provide-binaries.sh printed no KUBE_APISERVER/ETCD/HELM:\n${stdout}`);
  }
  return { kubeApiserver: KUBE_APISERVER, etcd: ETCD, helm: HELM };
}
