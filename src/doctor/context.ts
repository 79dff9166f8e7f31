// What every doctor step may read and none writes: the command's options, the API server, a
// client for TokenRequests and the progress line. What a step finds it returns (src/doctor/checks.ts).
import type { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { ApiServer } from '../issuer/read.ts';
import type { SecretCoreOptions } from '../mutate/secret.ts';
import type { CloudSettings } from '../clouds/settings.ts';
import type { PodProvider } from '../clouds/types.ts';

export interface DoctorOptions {
  kc: KubeConfig;
  providers: readonly PodProvider[];
  secrets: SecretCoreOptions;
  /** PEM of a CA trusted, besides the public roots, for the public issuer URL. */
  issuerCa?: string;
  /** Only this namespace's ServiceAccounts and Secrets. */
  namespace?: string;
  /** Told what doctor waits for before each read (an HTTP read can take seconds): a progress line. */
  progress?: (waitingFor: string) => void;
  /** The webhook's flags: the clouds' limits and configuration `trust` checks (docs/trust.md). */
  settings?: CloudSettings;
}

export interface DoctorContext {
  readonly options: DoctorOptions;
  readonly api: ApiServer;
  readonly core: CoreV1Api;
  /** Tells the person what doctor waits for now (an HTTP read can take seconds). */
  waiting(what: string): void;
}
