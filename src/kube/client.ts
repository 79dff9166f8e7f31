import { KubeConfig } from '@kubernetes/client-node';
import { ConfigError } from '../errors.ts';
import { noSuchContext } from './connect.ts';

/**
 * --kubeconfig, else in-cluster, else $KUBECONFIG or ~/.kube/config; with --context, that context
 * of the kubeconfig (never in-cluster credentials) instead of its current-context.
 */
export function loadKubeConfig(path: string | undefined, context?: string): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (path) kc.loadFromFile(path);
    else if (process.env.KUBERNETES_SERVICE_HOST && !context) kc.loadFromCluster();
    else kc.loadFromDefault();
  } catch (err) {
    throw new ConfigError(
      `cannot load the kubeconfig${path ? ` from --kubeconfig=${path}` : ''}: ${(err as Error).message}`,
    );
  }
  if (context !== undefined) {
    if (!kc.getContextObject(context))
      throw noSuchContext(
        context,
        kc.getContexts().map((c) => c.name),
      );
    kc.setCurrentContext(context);
  }
  if (!kc.getCurrentCluster()) {
    throw new ConfigError('no Kubernetes cluster configured: pass --kubeconfig, or run in a cluster');
  }
  return kc;
}
