// `serve` with --cert-secret: the certificate manager as the server's TLS source.

import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { KubeApi } from '../kube/api.ts';
import { ConfigError } from '../errors.ts';
import { CertificateManager } from './certificate-manager.ts';
import type { KeyPair } from './reloader.ts';

const IN_CLUSTER_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** The in-cluster namespace, for --cert-secret-namespace left empty. */
function ownNamespace(): string {
  try {
    return readFileSync(IN_CLUSTER_NAMESPACE_FILE, 'utf8').trim();
  } catch {
    throw new ConfigError(
      '--cert-secret-namespace is needed outside a cluster (no service account namespace file to default to)',
    );
  }
}

interface SelfManagedSettings {
  certSecret?: string;
  certSecretNamespace?: string;
  certWebhookConfiguration?: string;
  selfSignedHosts: string[];
  certValiditySeconds: number;
  certRenewBeforeSeconds: number;
  certPropagationSeconds: number;
  certResyncSeconds: number;
}

/** The server's TLS source in self-managed mode: the first pair, then each rotation. */
export async function selfManagedTls(
  config: SelfManagedSettings,
  api: KubeApi,
  log: Logger,
): Promise<{ pair: KeyPair; watch: (apply: (pair: KeyPair) => void) => () => void }> {
  const manager = new CertificateManager({
    api,
    log,
    namespace: config.certSecretNamespace ?? ownNamespace(),
    // biome-ignore lint/style/noNonNullAssertion: Called only with --cert-secret set (server.ts chooses the certificate source by it).
    secretName: config.certSecret!,
    webhookConfiguration: config.certWebhookConfiguration,
    hosts: config.selfSignedHosts,
    validitySeconds: config.certValiditySeconds,
    renewBeforeSeconds: config.certRenewBeforeSeconds,
    propagationSeconds: config.certPropagationSeconds,
    resyncSeconds: config.certResyncSeconds,
  });
  const pair = await manager.start();
  return {
    pair,
    watch: (apply) => {
      manager.onChange(apply);
      return () => manager.stop();
    },
  };
}
