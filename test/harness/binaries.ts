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
 * served one (K8S_NEWEST_VERSION, TEST_ASSET_KUBE_APISERVER_NEWEST), where MutatingAdmissionPolicy is v1.
 */
export type KubeVersion = 'tested' | 'newest';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export async function resolveBinaries(version: KubeVersion = 'tested'): Promise<Binaries> {
  const {
    TEST_ASSET_KUBE_APISERVER,
    TEST_ASSET_KUBE_APISERVER_NEWEST,
    TEST_ASSET_ETCD: etcd,
    TEST_ASSET_HELM: helm,
  } = process.env;
  const kubeApiserver = version === 'newest' ? TEST_ASSET_KUBE_APISERVER_NEWEST : TEST_ASSET_KUBE_APISERVER;
  if (kubeApiserver && etcd && helm) return { kubeApiserver, etcd, helm };
  return provide(version);
}

async function provide(version: KubeVersion): Promise<Binaries> {
  // The script honours the TEST_ASSET_* variables that are set and builds only the rest.
  // No timeout: a first build takes many minutes; its progress goes to our stderr.
  const script = spawn('bash', ['scripts/provide-binaries.sh', ...(version === 'newest' ? ['--newest'] : [])], {
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
  const KUBE_APISERVER = version === 'newest' ? vars.KUBE_APISERVER_NEWEST : vars.KUBE_APISERVER;
  if (!KUBE_APISERVER || !ETCD || !HELM) {
    throw new Error(`scripts/provide-binaries.sh printed no KUBE_APISERVER/ETCD/HELM:\n${stdout}`);
  }
  return { kubeApiserver: KUBE_APISERVER, etcd: ETCD, helm: HELM };
}
