// The kubeconfig as client-node's KubeConfig, for the commands that talk through client-node
// (doctor, the issuer commands) and the token requestor's credentials; the precedence and its
// errors are kubeconfig.ts's.
import { KubeConfig } from '@kubernetes/client-node';
import { kubeconfigSource, loadError, noCluster, withContext } from './kubeconfig.ts';

/**
 * --kubeconfig, else in-cluster, else $KUBECONFIG or ~/.kube/config; with --context, that context
 * of the kubeconfig (never in-cluster credentials) instead of its current-context.
 */
export function loadKubeConfig(path: string | undefined, context?: string): KubeConfig {
  const kc = new KubeConfig();
  const source = kubeconfigSource(path, context);
  try {
    if (source.kind === 'file') kc.loadFromFile(source.path);
    else if (source.kind === 'in-cluster') kc.loadFromCluster();
    else kc.loadFromDefault();
  } catch (err) {
    throw loadError(path, err);
  }
  withContext(kc, context);
  if (!kc.getCurrentCluster()) throw noCluster();
  return kc;
}
