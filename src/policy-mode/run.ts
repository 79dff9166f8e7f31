// The parameters controller under leader election: every replica campaigns for one Lease, the
// leader alone writes, and a new term starts from a fresh list.
import type { KubeConfig } from '@kubernetes/client-node';
import { LeaderElector } from '../token-requestor/lease.ts';
import { ParametersController, type ParametersControllerOptions } from './controller.ts';

export const PARAMETERS_LEASE = 'workload-identity-webhook-policy-parameters';

export interface ParametersRunnerOptions extends ParametersControllerOptions {
  kubeConfig: KubeConfig;
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
    kubeConfig: options.kubeConfig,
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
