// The fixture of one SDK-proof test file: a real kube-apiserver, the webhook registered with it
// as production runs it (and, for labelled Secrets, the token requestor), the cloud stand-ins on
// a loopback address, and helpers that create a Pod or a Secret, lay out what a container sees
// and start an official SDK on exactly that.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod, type V1Secret } from '@kubernetes/client-node';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { CLI } from '../harness/cli-process.ts';
import { startProcess, type Managed } from '../harness/processes.ts';
import { registerWebhook, startWebhook, until, type WebhookProcess } from '../support/webhook.ts';
import { materialiseContainer, type MaterialiseOptions, type MaterialisedContainer } from './materialise.ts';
import { loadClusterIssuer, type ClusterIssuer } from './oidc.ts';
import { startSdk, type Cloud, type Language, type SdkProcess } from './sdk-process.ts';
import { startStandInServer, type StandInServer, type StandInService } from './standin-server.ts';

export interface SdkClusterOptions {
  name: string;
  namespace: string;
  /** ServiceAccount name -> annotations. */
  serviceAccounts: Record<string, Record<string, string>>;
  /** Flags of `serve`, and of `token-requestor` when `secrets` is set. */
  webhookArgs?: string[];
  /** Also register the webhook for labelled Secrets and run the token requestor. */
  secrets?: boolean;
  /** The cloud's services, built once the cluster's issuer is known. */
  services(issuer: ClusterIssuer): StandInService[];
}

export interface SdkCluster {
  cp: ControlPlane;
  webhook: WebhookProcess;
  issuer: ClusterIssuer;
  standIn: StandInServer;
  namespace: string;
  /** Creates a Pod and returns it as the API server stored it after admission. */
  createPod(
    serviceAccountName: string,
    opts?: {
      labels?: Record<string, string>;
      env?: Record<string, string>;
      sidecars?: string[];
      generateName?: boolean;
    },
  ): Promise<V1Pod>;
  /**
   * Creates a labelled Secret (GEP-26) and returns it as stored once the token requestor has
   * written its token and the webhook has derived its keys.
   */
  createSecret(
    name: string,
    provider: 'aws' | 'azure' | 'gcp',
    serviceAccountName: string,
    config: unknown,
  ): Promise<V1Secret>;
  /** Asks the token requestor for a new token now (the renew annotation); returns the Secret once it holds another. */
  renewSecretToken(name: string): Promise<V1Secret>;
  /** A Pod that mounts `secretName` at `mountPath`, with the env vars its author set. */
  createSecretPod(secretName: string, mountPath: string, env: Record<string, string>): Promise<V1Pod>;
  /** The Pod's first container (or `container`) as it would see itself, under a fresh folder of this test file's root. */
  materialise(pod: V1Pod, options?: MaterialiseOptions & { container?: string }): Promise<MaterialisedContainer>;
  /** An SDK child process on exactly that container's environment; stopped by `stop()` if not before. */
  startSdk(language: Language, cloud: Cloud, container: MaterialisedContainer): SdkProcess;
  /** All three: a Pod of `serviceAccountName`, its container laid out, an SDK started on it. */
  start(language: Language, cloud: Cloud, serviceAccountName: string, options?: StartOptions): Promise<SdkCase>;
  stop(): Promise<void>;
}

// The project's label and annotations (src/mutate/secret-labels.ts), spelled out: tests state the API.
const PROVIDER_LABEL = 'workload-identity-webhook.io/provider';
const SERVICE_ACCOUNT_ANNOTATION = 'workload-identity-webhook.io/service-account';
const RENEW_ANNOTATION = 'workload-identity-webhook.io/renew-requested-at';

export interface StartOptions extends MaterialiseOptions {
  labels?: Record<string, string>;
  /** Env vars the Pod's author set on the container (an image's hard-coded settings). */
  env?: Record<string, string>;
  /** More containers of the Pod, after `app` (same image, no env of their own). */
  sidecars?: string[];
  /** The container the SDK runs in; default `app`. */
  container?: string;
  /** Name the Pod by generateName (`<serviceAccount>-`), so it has no name at admission. */
  generateName?: boolean;
}

export interface SdkCase {
  pod: V1Pod;
  container: MaterialisedContainer;
  sdk: SdkProcess;
}

export async function startSdkCluster(options: SdkClusterOptions): Promise<SdkCluster> {
  const cp = await startControlPlane({ name: options.name });
  // Inside the control plane's folder, which the harness removes even if this process is killed.
  const root = join(cp.dir, 'sdk-proof');
  await mkdir(root);
  const children: SdkProcess[] = [];
  let webhook: WebhookProcess | undefined;
  let requestor: Managed | undefined;
  let standIn: StandInServer | undefined;
  const stop = async (): Promise<void> => {
    await Promise.all(children.map((c) => c.stop()));
    await standIn?.stop();
    await requestor?.stop();
    await webhook?.stop();
    await cp.stop();
  };
  try {
    const issuer = await loadClusterIssuer(cp);
    standIn = await startStandInServer(root, options.services(issuer));
    const selector = { 'sdk-proof.workload-identity-webhook.io/ns': options.namespace };
    await createNamespace(cp, options.namespace, selector);
    for (const [name, annotations] of Object.entries(options.serviceAccounts)) {
      await createServiceAccount(cp, options.namespace, name, annotations);
    }
    webhook = await startWebhook(cp, options.webhookArgs ?? []);
    const webhooks: Parameters<typeof registerWebhook>[3] = [{ namespaceSelector: { matchLabels: selector } }];
    if (options.secrets) {
      // As the chart registers it: labelled Secrets on every write.
      webhooks.push({
        namespaceSelector: { matchLabels: selector },
        objectSelector: { matchExpressions: [{ key: PROVIDER_LABEL, operator: 'Exists' }] },
        rules: [
          {
            apiGroups: [''],
            apiVersions: ['v1'],
            operations: ['CREATE', 'UPDATE'],
            resources: ['secrets'],
            scope: 'Namespaced',
          },
        ],
      });
    }
    // Both webhooks of one configuration go live together; the Pod probe waits for them.
    await registerWebhook(cp, webhook, `sdk-proof-${options.name}`, webhooks, options.namespace);
    if (options.secrets) {
      await createServiceAccount(cp, options.namespace, 'secret-consumer');
      requestor = startProcess(
        'token-requestor',
        process.execPath,
        [
          CLI,
          'token-requestor',
          '--kubeconfig',
          cp.kubeconfigPath,
          '--lease-namespace',
          options.namespace,
          '--metrics-host',
          '127.0.0.1',
          '--metrics-port',
          '0',
          ...(options.webhookArgs ?? []),
        ],
        join(cp.dir, 'token-requestor.log'),
      );
    }

    const core = cp.kubeConfig().makeApiClient(CoreV1Api);
    const withRequestorLog = <T>(waiting: Promise<T>): Promise<T> =>
      waiting.catch((err: Error) => {
        throw new Error(`${err.message}\n--- token-requestor log ---\n${requestor?.logTail(30)}`);
      });
    let seq = 0;
    const server = standIn;
    const wh = webhook;
    const cluster: SdkCluster = {
      cp,
      webhook: wh,
      issuer,
      standIn: server,
      namespace: options.namespace,
      async createPod(serviceAccountName, opts = {}) {
        const created = await core.createNamespacedPod({
          namespace: options.namespace,
          body: {
            metadata: {
              ...(opts.generateName
                ? { generateName: `${serviceAccountName}-` }
                : { name: `${serviceAccountName}-${++seq}` }),
              labels: opts.labels,
            },
            spec: {
              serviceAccountName,
              containers: [
                {
                  name: 'app',
                  image: 'app',
                  ...(opts.env ? { env: Object.entries(opts.env).map(([name, value]) => ({ name, value })) } : {}),
                },
                ...(opts.sidecars ?? []).map((name) => ({ name, image: 'app' })),
              ],
            },
          },
        });
        return core.readNamespacedPod({ namespace: options.namespace, name: created.metadata!.name! });
      },
      async createSecret(name, provider, serviceAccountName, config) {
        await core.createNamespacedSecret({
          namespace: options.namespace,
          body: {
            metadata: {
              name,
              labels: { [PROVIDER_LABEL]: provider },
              annotations: { [SERVICE_ACCOUNT_ANNOTATION]: serviceAccountName },
            },
            data: { config: Buffer.from(JSON.stringify(config)).toString('base64') },
          },
        });
        return withRequestorLog(
          until(`the token requestor to write Secret ${name}'s token`, async () => {
            const secret = await core.readNamespacedSecret({ namespace: options.namespace, name });
            return secret.data?.token ? secret : undefined;
          }),
        );
      },
      async renewSecretToken(name) {
        const before = await core.readNamespacedSecret({ namespace: options.namespace, name });
        await core.patchNamespacedSecret(
          {
            namespace: options.namespace,
            name,
            body: { metadata: { annotations: { [RENEW_ANNOTATION]: new Date().toISOString() } } },
          },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        return withRequestorLog(
          until(`the token requestor to renew Secret ${name}'s token`, async () => {
            const secret = await core.readNamespacedSecret({ namespace: options.namespace, name });
            return secret.data?.token && secret.data.token !== before.data?.token ? secret : undefined;
          }),
        );
      },
      async createSecretPod(secretName, mountPath, env) {
        const created = await core.createNamespacedPod({
          namespace: options.namespace,
          body: {
            metadata: { name: `uses-${secretName}-${++seq}` },
            spec: {
              serviceAccountName: 'secret-consumer',
              volumes: [{ name: 'workload-identity', secret: { secretName } }],
              containers: [
                {
                  name: 'app',
                  image: 'app',
                  env: Object.entries(env).map(([n, value]) => ({ name: n, value })),
                  volumeMounts: [{ name: 'workload-identity', mountPath, readOnly: true }],
                },
              ],
            },
          },
        });
        return core.readNamespacedPod({ namespace: options.namespace, name: created.metadata!.name! });
      },
      materialise(pod, materialiseOptions) {
        const name = materialiseOptions?.container ?? pod.spec!.containers[0].name;
        return materialiseContainer(cp, pod, name, join(root, 'pods', pod.metadata!.name!, name), materialiseOptions);
      },
      startSdk(language, cloud, container) {
        const child = startSdk(language, cloud, container.env, server, join(container.root, 'home'));
        children.push(child);
        return child;
      },
      async start(language, cloud, serviceAccountName, startOptions = {}) {
        const pod = await cluster.createPod(serviceAccountName, {
          labels: startOptions.labels,
          env: startOptions.env,
          sidecars: startOptions.sidecars,
          generateName: startOptions.generateName,
        });
        const container = await cluster.materialise(pod, {
          tokenAudience: startOptions.tokenAudience,
          container: startOptions.container,
        });
        return { pod, container, sdk: cluster.startSdk(language, cloud, container) };
      },
      stop,
    };
    return cluster;
  } catch (err) {
    await stop();
    throw err;
  }
}
