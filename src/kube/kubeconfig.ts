// Where both Kubernetes clients find the API server, written once: --kubeconfig, else in-cluster,
// else $KUBECONFIG or ~/.kube/config; with --context, that context of the kubeconfig (never
// in-cluster credentials) instead of its current-context. `serve` reads what it can itself
// (connect.ts, no client-node); the other commands load client-node's KubeConfig (client.ts).
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { ConfigError, errorMessage } from '../errors.ts';

type KubeconfigSource =
  | { kind: 'file'; path: string }
  | { kind: 'in-cluster' }
  /** $KUBECONFIG or ~/.kube/config: `files` is $KUBECONFIG's list, empty when it is unset. */
  | { kind: 'default'; files: string[] };

export function kubeconfigSource(path: string | undefined, context: string | undefined): KubeconfigSource {
  if (path) return { kind: 'file', path };
  if (process.env.KUBERNETES_SERVICE_HOST && context === undefined) return { kind: 'in-cluster' };
  return { kind: 'default', files: (process.env.KUBECONFIG ?? '').split(delimiter).filter(Boolean) };
}

/** The one file of the default source: $KUBECONFIG's only entry, or ~/.kube/config. */
export function defaultFile(files: readonly string[]): string {
  return files[0] ?? join(homedir(), '.kube', 'config');
}

/** A failure to load the kubeconfig as the user sees it; the loader's own ConfigErrors pass unchanged. */
export function loadError(path: string | undefined, err: unknown): ConfigError {
  if (err instanceof ConfigError) return err;
  return new ConfigError(`cannot load the kubeconfig${path ? ` from --kubeconfig=${path}` : ''}: ${errorMessage(err)}`);
}

export function noCluster(): ConfigError {
  return new ConfigError('no Kubernetes cluster configured: pass --kubeconfig, or run in a cluster');
}

/** --context naming no context of the kubeconfig: the error names the ones it has. */
export function noSuchContext(context: string, names: (string | undefined)[]): ConfigError {
  const has = names.length > 0 ? names.map((n) => JSON.stringify(n ?? '')).join(', ') : 'none';
  return new ConfigError(`--context ${JSON.stringify(context)}: the kubeconfig has no such context (it has ${has})`);
}

/** client-node's KubeConfig set to --context, when given. */
export function withContext(kc: KubeConfig, context: string | undefined): KubeConfig {
  if (context === undefined) return kc;
  if (!kc.getContextObject(context))
    throw noSuchContext(
      context,
      kc.getContexts().map((c) => c.name),
    );
  kc.setCurrentContext(context);
  return kc;
}
