import { KubeConfig } from '@kubernetes/client-node';
import { ConfigError } from '../errors.ts';

/** --kubeconfig, else in-cluster, else $KUBECONFIG or ~/.kube/config. */
export function loadKubeConfig(path: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (path) kc.loadFromFile(path);
    else if (process.env.KUBERNETES_SERVICE_HOST) kc.loadFromCluster();
    else kc.loadFromDefault();
  } catch (err) {
    throw new ConfigError(
      `cannot load the kubeconfig${path ? ` from --kubeconfig=${path}` : ''}: ${(err as Error).message}`,
    );
  }
  if (!kc.getCurrentCluster()) {
    throw new ConfigError('no Kubernetes cluster configured: pass --kubeconfig, or run in a cluster');
  }
  return kc;
}
