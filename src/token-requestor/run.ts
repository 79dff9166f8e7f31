import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { loadKubeConfig } from '../kube/client.ts';
import type { KubeApi } from '../kube/api.ts';
import { kubeApiOf } from '../kube/connect.ts';
import { PROVIDER_LABEL } from '../model.ts';
import type { SecretCoreOptions } from '../mutate/secret.ts';
import { createSecretProviders } from '../clouds/index.ts';
import type { RequestorConfig } from './config.ts';
import type { RequestorApi } from './api.ts';
import { kubeRequestorApi } from './kube-api.ts';
import { LeaderElector } from '../kube/lease.ts';
import { serveMetrics } from '../metrics.ts';
import { createRequestorMetrics, type RequestorMetrics } from './metrics.ts';
import { TokenRequestor } from './requestor.ts';
import { SecretInformer } from './secret-informer.ts';

export interface RunningRequestor {
  metricsPort: number;
  /** Stops writing, releases the Lease, closes the metrics listener. */
  shutdown(): Promise<void>;
}

/**
 * `token-requestor`: campaigns for the Lease; while leading, watches Secrets carrying the
 * project's label and keeps their tokens fresh. Losing the Lease stops all writes at once; a
 * new term starts from a fresh list.
 */
export async function runTokenRequestor(config: Config, rc: RequestorConfig, root: Logger): Promise<RunningRequestor> {
  // One child logger per component, made once: a new leadership term reuses them.
  const log = root.child({ component: 'token-requestor' });
  const informerLog = root.child({ component: 'secret-informer' });
  const kubeConfig = loadKubeConfig(config.kubeconfig, config.kubeContext);
  const metrics = createRequestorMetrics();
  // Every watch and call of every term on one HTTP/2 pool: 2,000 namespaces hold 10 connections, not 2,000.
  const watchApi = kubeApiOf(kubeConfig, { http2: true });
  const api = kubeRequestorApi(watchApi, rc.identity);
  const core = { providers: createSecretProviders(config), defaultTokenPath: config.secretTokenPath };
  const terms = leadershipTerms({ rc, core, api, watchApi, metrics, log, informerLog });

  // The Lease on a connection of its own: a renewal never waits behind the watches' streams.
  const leaseApi = kubeApiOf(kubeConfig);
  const elector = new LeaderElector({
    api: leaseApi,
    namespace: rc.leaseNamespace,
    name: rc.leaseName,
    identity: rc.identity,
    leaseDurationSeconds: rc.leaseDurationSeconds,
    log: root.child({ component: 'lease' }),
    onStartedLeading: terms.begin,
    onStoppedLeading: terms.end,
  });

  const { server, port: metricsPort } = await serveMetrics(metrics.registry, config.metricsHost, config.metricsPort, {
    '/healthz': () => ({ status: 'ok', leader: elector.isLeader }),
  });
  elector.start();
  logStarted(log, rc, metricsPort);

  let stopping: Promise<void> | undefined;
  return {
    metricsPort,
    shutdown() {
      stopping ??= (async () => {
        await elector.stop();
        watchApi.close();
        leaseApi.close();
        await new Promise((resolve) => server.close(resolve));
        log.info('stopped');
      })();
      return stopping;
    },
  };
}

/** The start-up line: where the metrics are served, who campaigns for which Lease, and what it watches. */
function logStarted(log: Logger, rc: RequestorConfig, metricsPort: number): void {
  log.info(
    {
      metricsPort,
      identity: rc.identity,
      lease: `${rc.leaseNamespace}/${rc.leaseName}`,
      namespaces: rc.namespaces.length ? rc.namespaces.length : 'all',
      watchScope: rc.namespaces.length ? rc.watchScope : 'cluster',
    },
    'token requestor started',
  );
}

/** What every leadership term shares, made once at start-up. */
interface TermParts {
  rc: RequestorConfig;
  core: SecretCoreOptions;
  api: RequestorApi;
  /** The pool the informers watch on. */
  watchApi: KubeApi;
  metrics: RequestorMetrics;
  log: Logger;
  informerLog: Logger;
}

/**
 * The Lease's two callbacks. A term that begins gets a requestor of its own, fed by informers of
 * its own that list afresh; a term that ends stops them, and with them every write, at once.
 */
function leadershipTerms(parts: TermParts): { begin(): void; end(): void } {
  const { rc, metrics } = parts;
  let term: { requestor: TokenRequestor; informers: SecretInformer[]; stopped: boolean } | undefined;
  return {
    begin() {
      metrics.leader.set(1);
      const requestor = new TokenRequestor({
        core: parts.core,
        api: parts.api,
        log: parts.log,
        metrics,
        expirationSeconds: rc.tokenExpiration,
        namespaces: rc.namespaces,
      });
      const informers = watchScopes(rc).map(
        ({ namespace, served }) =>
          new SecretInformer({
            api: parts.watchApi,
            labelSelector: PROVIDER_LABEL,
            namespace,
            served,
            log: parts.informerLog,
            onChange: (key, s) => requestor.onChange(key, s),
          }),
      );
      const current = { requestor, informers, stopped: false };
      term = current;
      void startGradually(informers, () => current.stopped);
    },
    end() {
      metrics.leader.set(0);
      if (term) term.stopped = true;
      for (const informer of term?.informers ?? []) informer.stop();
      term?.requestor.stop();
      term = undefined;
    },
  };
}

/**
 * The watches of a term: one per listed namespace (access granted per namespace: a cluster-wide
 * list would be refused), or one cluster-wide watch for the label, keeping only the listed
 * namespaces' Secrets (`cluster`, or no namespaces listed: all served).
 */
export function watchScopes(rc: Pick<RequestorConfig, 'namespaces' | 'watchScope'>): {
  namespace?: string;
  served?: ReadonlySet<string>;
}[] {
  if (!rc.namespaces.length) return [{}];
  if (rc.watchScope === 'cluster') return [{ served: new Set(rc.namespaces) }];
  return rc.namespaces.map((namespace) => ({ namespace }));
}

/**
 * Watches whose first list is under way at once. Each list holds seats of kube-apiserver's
 * priority and fairness while it runs: 2,000 started together were answered 429 by the
 * thousand, retried with backoff, and starved the Lease's renewals with them.
 */
export const MAX_LISTS_AT_ONCE = 16;

/** Starts the informers MAX_LISTS_AT_ONCE at a time, each once the one before it has listed. */
export async function startGradually(
  informers: Pick<SecretInformer, 'start'>[],
  stopped: () => boolean,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(MAX_LISTS_AT_ONCE, informers.length) }, async () => {
      while (next < informers.length && !stopped()) await informers[next++].start();
    }),
  );
}
