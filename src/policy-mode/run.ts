// The parameters controller under leader election: every replica campaigns for one Lease, the
// leader alone writes, and a new term starts from a fresh list.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { serviceAccountAnnotations } from '../clouds/index.ts';
import type { PodProvider } from '../clouds/types.ts';
import type { Config } from '../config.ts';
import { ConfigError } from '../errors.ts';
import type { KubeApi } from '../kube/api.ts';
import type { TenantJudges } from '../policy/gate.ts';
import { LeaderElector } from '../kube/lease.ts';
import { ParametersController, type ParametersControllerOptions } from './controller.ts';

const PARAMETERS_LEASE = 'workload-identity-webhook-policy-parameters';

interface ParametersRunnerOptions extends ParametersControllerOptions {
  leaseNamespace: string;
  leaseName?: string;
  /** This replica's name in the Lease (its Pod name). */
  identity: string;
  leaseDurationSeconds?: number;
}

export interface ParametersRunner {
  readonly isLeader: boolean;
  /** The controller of the current term, if leading. */
  readonly controller: ParametersController | undefined;
  /** Stops writing and releases the Lease, so a standby takes over at once. */
  stop(): Promise<void>;
}

export function runParametersController(options: ParametersRunnerOptions): ParametersRunner {
  let controller: ParametersController | undefined;
  const elector = new LeaderElector({
    api: options.api,
    namespace: options.leaseNamespace,
    name: options.leaseName ?? PARAMETERS_LEASE,
    identity: options.identity,
    leaseDurationSeconds: options.leaseDurationSeconds ?? 15,
    log: options.log.child({ component: 'policy-parameters-lease' }),
    onStartedLeading: () => {
      controller = new ParametersController(options);
      controller.start().catch((err: Error) => options.log.error({ err }, 'the policy parameters controller failed'));
    },
    onStoppedLeading: () => {
      void controller?.stop();
      controller = undefined;
    },
  });
  elector.start();
  return {
    get isLeader() {
      return elector.isLeader;
    },
    get controller() {
      return controller;
    },
    stop: async () => {
      await elector.stop();
      await controller?.stop();
    },
  };
}

const IN_CLUSTER_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** `serve --policy-parameters`: the runner with serve's client, providers and tenant policy. */
export function startPolicyParameters(
  config: Config,
  api: KubeApi,
  providers: readonly PodProvider[],
  judges: TenantJudges | undefined,
  policyVersion: (() => unknown) | undefined,
  root: Logger,
): ParametersRunner {
  return runParametersController({
    leaseNamespace: config.policyParametersLeaseNamespace ?? inClusterNamespace(),
    identity: hostname(),
    api,
    providers,
    annotations: serviceAccountAnnotations(providers),
    judge: judges && ((namespace) => judges.pod(namespace)),
    policyVersion,
    log: root.child({ component: 'policy-parameters' }),
  });
}

function inClusterNamespace(): string {
  try {
    return readFileSync(IN_CLUSTER_NAMESPACE_FILE, 'utf8').trim();
  } catch {
    throw new ConfigError(
      '--policy-parameters-lease-namespace is needed outside a cluster (no service account namespace file to default to)',
    );
  }
}
