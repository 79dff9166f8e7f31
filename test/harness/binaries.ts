// Locates kube-apiserver, etcd and helm: from the TEST_ASSET_* variables the test runner sets,
// otherwise from scripts/provide-binaries.sh (which builds them once and caches them).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface Binaries {
  kubeApiserver: string;
  etcd: string;
  helm: string;
}

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export async function resolveBinaries(): Promise<Binaries> {
  const { TEST_ASSET_KUBE_APISERVER: kubeApiserver, TEST_ASSET_ETCD: etcd, TEST_ASSET_HELM: helm } = process.env;
  if (kubeApiserver && etcd && helm) return { kubeApiserver, etcd, helm };
  return provide();
}

async function provide(): Promise<Binaries> {
  // The script honours the TEST_ASSET_* variables that are set and builds only the rest.
  // No timeout: a first build takes many minutes; its progress goes to our stderr.
  const script = spawn('bash', ['scripts/provide-binaries.sh'], {
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
  const { KUBE_APISERVER, ETCD, HELM } = vars;
  if (!KUBE_APISERVER || !ETCD || !HELM) {
    throw new Error(`scripts/provide-binaries.sh printed no KUBE_APISERVER/ETCD/HELM:\n${stdout}`);
  }
  return { kubeApiserver: KUBE_APISERVER, etcd: ETCD, helm: HELM };
}
