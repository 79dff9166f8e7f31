// A real node for the test control plane: containerd (runc, bridge CNI) and a kubelet, plus the
// kube-controller-manager and kube-scheduler that turn Deployments into running Pods. Images
// come from scripts/provide-images.sh (built locally, never pulled); binaries from
// scripts/provide-binaries.sh --node. The API server reaches Pods (webhook Services included)
// by their endpoints (--enable-aggregator-routing); Pods reach the API server through its
// Service's ClusterIP, forwarded by one NAT rule. Needs root.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { chosenKubeVersion, type KubeVersion } from './binaries.ts';
import { freePorts, startControlPlane, type ControlPlane } from './control-plane.ts';
import { scriptVars } from './node-images.ts';
import { startProcess, type Managed } from './processes.ts';
import {
  createBridge,
  createCgroupRoot,
  createNodeDir,
  forwardServiceIp,
  killProcessesUsing,
  sh,
  sweepStaleNodes,
  undoHost,
  type HostRecord,
} from './node-host.ts';

const CNI_BIN = '/usr/lib/cni';
const KUBERNETES_SERVICE_IP = '10.0.0.1';
const READY_TIMEOUT_MS = 120_000;

export interface NodeImages {
  /** The webhook image built from the Dockerfile. */
  webhook: string;
  /** node:24-bookworm-slim as scripts/base-image.sh produced it (Node.js, no SDKs). */
  base: string;
  pause: string;
}

export interface NodeCluster {
  cp: ControlPlane;
  nodeName: string;
  /** The host's address on the Pods' bridge: what a Pod reaches the host by. */
  hostIp: string;
  images: NodeImages;
  dir: string;
  /** containerd's socket (`ctr --address`). */
  containerdSocket: string;
  /** The processes besides the control plane, for their logs. */
  daemons: Record<'containerd' | 'kubelet' | 'controllerManager' | 'scheduler', Managed>;
  /** Containers containerd runs now, in the k8s.io namespace (ids). */
  runningContainers(): Promise<string[]>;
  /**
   * Lets containerd pull from a registry over plain HTTP (a test registry on the loopback), as an
   * operator would in /etc/containerd/certs.d/<host>/hosts.toml. containerd reads it at each pull.
   */
  trustRegistry(host: string): Promise<void>;
  /** Deletes every Pod, waits for the node to stop them, stops everything, undoes the host changes. Idempotent. */
  stop(): Promise<void>;
}

export interface NodeOptions {
  name?: string;
  /**
   * The control plane's kube-apiserver (test/harness/control-plane.ts); unset: the one
   * WIW_KUBE_VERSION chooses. The node's own binaries are always the suite's (v1.34.4,
   * scripts/provide-binaries.sh --node): with `newest` (v1.36.3) the kubelet is two minors older
   * than kube-apiserver, inside Kubernetes' skew policy (a kubelet up to three minors older).
   * kube-controller-manager and kube-scheduler are documented one minor behind only; at two they
   * still do all the node tests ask of them (Deployments, ReplicaSets, scheduling, EndpointSlices,
   * ServiceAccounts, node lifecycle: v1 APIs 1.36 serves unchanged), with no error in their logs,
   * and test/e2e/node-policy.test.ts runs them so: building v1.36 ones would add a Go build of
   * minutes to a cold cache for one file. `oldest` (v1.30) would make the kubelet newer than
   * kube-apiserver, which Kubernetes never supports: refused.
   */
  version?: KubeVersion;
}

/** Why this machine cannot run a node, or undefined if it can. */
export function nodeUnsupportedReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'a node needs root (containerd, runc, network and cgroups)';
  for (const bin of [
    '/usr/bin/containerd',
    '/usr/bin/ctr',
    '/usr/sbin/runc',
    `${CNI_BIN}/bridge`,
    `${CNI_BIN}/host-local`,
    `${CNI_BIN}/loopback`,
    '/usr/bin/buildah',
  ]) {
    if (!existsSync(bin))
      return `${bin} is missing: install containerd runc containernetworking-plugins buildah (scripts/node-packages.sh)`;
  }
  return undefined;
}

export async function startNode(options: NodeOptions = {}): Promise<NodeCluster> {
  const unsupported = nodeUnsupportedReason();
  if (unsupported) throw new Error(unsupported);
  const version = options.version ?? chosenKubeVersion();
  if (version === 'oldest')
    throw new Error("a node runs the suite's kubelet (v1.34): kube-apiserver must not be older (version 'oldest')");
  await sweepStaleNodes();
  const [bins, imageVars] = await Promise.all([
    scriptVars('scripts/provide-binaries.sh', ['--node']),
    scriptVars('scripts/provide-images.sh'),
  ]);
  const images: NodeImages = {
    webhook: imageVars.WEBHOOK_IMAGE,
    base: imageVars.BASE_IMAGE,
    pause: imageVars.PAUSE_IMAGE,
  };

  const id = randomBytes(3).toString('hex');
  const nodeName = `wiw-node-${id}`;
  const host: HostRecord = await createNodeDir(id);
  const dir = host.dir;
  const file = (n: string): string => join(dir, n);
  const daemons: Partial<NodeCluster['daemons']> = {};
  let cp: ControlPlane | undefined;

  let stopping: Promise<void> | undefined;
  const teardown = async (): Promise<void> => {
    if (cp && daemons.kubelet && daemons.kubelet.exitStatus() === null) await drain(cp, runningContainers);
    for (const d of [daemons.scheduler, daemons.controllerManager, daemons.kubelet]) await d?.stop();
    await daemons.containerd?.stop();
    // The shims (and anything else started for this node) outlive containerd by design.
    await killProcessesUsing(dir);
    await undoHost(host);
    await cp?.stop();
  };
  const socket = file('containerd.sock');
  const runningContainers = async (): Promise<string[]> =>
    (await sh('ctr', ['--address', socket, '-n', 'k8s.io', 'tasks', 'list', '-q'])).split('\n').filter(Boolean);

  try {
    const bridge = `wiw${id}`;
    const { subnet, gateway } = await createBridge(host, bridge);
    cp = await startControlPlane({
      name: options.name ?? 'node',
      version,
      servingIps: [gateway],
      extraArgs: [
        // Pods (on the bridge) reach the API server at the gateway address.
        '--bind-address=0.0.0.0',
        `--advertise-address=${gateway}`,
        '--endpoint-reconciler-type=lease',
        // Webhook Services are called at their endpoints' Pod IPs: no kube-proxy needed.
        '--enable-aggregator-routing=true',
        '--authorization-mode=Node,RBAC',
        '--disable-admission-plugins=',
        '--enable-admission-plugins=NodeRestriction,ServiceAccount',
      ],
    });
    const apiPort = new URL(cp.server).port;
    await forwardServiceIp(host, `WIW-${id.toUpperCase()}`, bridge, KUBERNETES_SERVICE_IP, `${gateway}:${apiPort}`);
    const cgroupRoot = await createCgroupRoot(host, `wiw-${id}`);

    // containerd, with all its state in the node's folder.
    await Promise.all(
      ['containerd/root', 'containerd/state', 'containerd/certs.d', 'cni/net.d', 'cni/ipam', 'runc'].map((d) =>
        mkdir(file(d), { recursive: true }),
      ),
    );
    await writeFile(
      file('cni/net.d/10-wiw.conflist'),
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'wiw',
        plugins: [
          {
            type: 'bridge',
            bridge,
            isGateway: true,
            isDefaultGateway: true,
            ipMasq: false,
            hairpinMode: true,
            ipam: { type: 'host-local', ranges: [[{ subnet, gateway }]], dataDir: file('cni/ipam') },
          },
          { type: 'loopback' },
        ],
      }),
    );
    await writeFile(file('containerd.toml'), containerdConfig(dir, socket, images.pause));
    daemons.containerd = startProcess(
      'containerd',
      '/usr/bin/containerd',
      ['--config', file('containerd.toml')],
      file('containerd.log'),
    );
    await waitFor(daemons.containerd, 'containerd socket', async () => {
      await sh('ctr', ['--address', socket, 'version']);
      return true;
    });
    for (const archive of [
      imageVars.PAUSE_IMAGE_ARCHIVE,
      imageVars.WEBHOOK_IMAGE_ARCHIVE,
      imageVars.BASE_IMAGE_ARCHIVE,
    ]) {
      await sh('ctr', ['--address', socket, '-n', 'k8s.io', 'images', 'import', '--no-unpack=false', archive]);
    }

    // The kubelet, as system:node:<name> (the Node authorizer scopes what it may read).
    const [kubeletPort] = await freePorts(1);
    const kubeletCert = await cp.issueClientCert(`system:node:${nodeName}`, ['system:nodes']);
    await writeFile(file('kubelet.kubeconfig'), kubeconfig(cp, kubeletCert), { mode: 0o600 });
    await writeFile(file('ca.crt'), cp.caPem);
    await writeFile(file('resolv.conf'), '');
    await writeFile(
      file('kubelet.yaml'),
      stringify({
        apiVersion: 'kubelet.config.k8s.io/v1beta1',
        kind: 'KubeletConfiguration',
        authentication: {
          anonymous: { enabled: false },
          webhook: { enabled: false },
          x509: { clientCAFile: file('ca.crt') },
        },
        authorization: { mode: 'AlwaysAllow' },
        address: gateway,
        port: kubeletPort,
        readOnlyPort: 0,
        healthzPort: 0,
        cgroupDriver: 'cgroupfs',
        cgroupRoot,
        failCgroupV1: false,
        failSwapOn: false,
        containerRuntimeEndpoint: `unix://${socket}`,
        podLogsDir: file('pod-logs'),
        volumePluginDir: file('volume-plugins'),
        resolvConf: file('resolv.conf'),
        // The machine's disk is shared: never evict or garbage-collect the test's images.
        evictionHard: {
          'memory.available': '100Mi',
          'nodefs.available': '1%',
          'imagefs.available': '1%',
          'nodefs.inodesFree': '1%',
        },
        imageGCHighThresholdPercent: 100,
        imageGCLowThresholdPercent: 99,
        serializeImagePulls: false,
        // Projected and Secret volumes are refreshed sooner than the default minute.
        syncFrequency: '10s',
        registerNode: true,
      }),
    );
    daemons.kubelet = startProcess(
      'kubelet',
      bins.KUBELET,
      [
        `--config=${file('kubelet.yaml')}`,
        `--kubeconfig=${file('kubelet.kubeconfig')}`,
        `--root-dir=${file('kubelet')}`,
        `--cert-dir=${file('kubelet-pki')}`,
        `--hostname-override=${nodeName}`,
        `--node-ip=${gateway}`,
        '--v=2',
      ],
      file('kubelet.log'),
    );

    // The controllers run as admin: they are the test's, not the product's.
    daemons.controllerManager = startProcess(
      'kube-controller-manager',
      bins.KUBE_CONTROLLER_MANAGER,
      [
        `--kubeconfig=${cp.kubeconfigPath}`,
        '--leader-elect=false',
        '--secure-port=0',
        `--root-ca-file=${file('ca.crt')}`,
        `--service-account-private-key-file=${join(cp.dir, 'sa.key')}`,
        '--use-service-account-credentials=false',
        // nodelifecycle stays: it lifts the not-ready taint the kubelet registers with.
        '--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-ephemeral-volume,-pvc-protection,-pv-protection',
      ],
      file('kube-controller-manager.log'),
    );
    daemons.scheduler = startProcess(
      'kube-scheduler',
      bins.KUBE_SCHEDULER,
      [`--kubeconfig=${cp.kubeconfigPath}`, '--leader-elect=false', '--secure-port=0'],
      file('kube-scheduler.log'),
    );

    const core = cp.kubeConfig().makeApiClient(CoreV1Api);
    await waitFor(daemons.kubelet, `node ${nodeName} Ready`, async () => {
      for (const d of [daemons.controllerManager!, daemons.scheduler!]) {
        if (d.exitStatus() !== null) throw new Error(`${d.name} exited (${d.exitStatus()}):\n${d.logTail(30)}`);
      }
      const node = await core.readNode({ name: nodeName });
      return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
    });
    // The ServiceAccount admission plugin needs the `default` ServiceAccount the controller makes.
    await waitFor(daemons.controllerManager, 'ServiceAccount default/default', async () => {
      await core.readNamespacedServiceAccount({ namespace: 'default', name: 'default' });
      return true;
    });

    const controlPlane = cp;
    return {
      cp: controlPlane,
      nodeName,
      hostIp: gateway,
      images,
      dir,
      containerdSocket: socket,
      daemons: daemons as NodeCluster['daemons'],
      runningContainers,
      trustRegistry: async (registryHost: string) => {
        if (!/^[a-z0-9.-]+:\d+$/.test(registryHost)) throw new Error(`not host:port: ${registryHost}`);
        const hostDir = file(`containerd/certs.d/${registryHost}`);
        await mkdir(hostDir, { recursive: true });
        await writeFile(
          join(hostDir, 'hosts.toml'),
          `server = "http://${registryHost}"\n[host."http://${registryHost}"]\n  capabilities = ["pull", "resolve"]\n`,
        );
      },
      stop: () => (stopping ??= teardown()),
    };
  } catch (err) {
    await (stopping ??= teardown()).catch((cleanupErr: Error) => {
      (err as Error).message += `\n(and teardown: ${cleanupErr.message})`;
    });
    throw err;
  }
}

/** Deletes every Pod and waits until containerd runs no container (kubelet stopped them all). */
async function drain(cp: ControlPlane, running: () => Promise<string[]>): Promise<void> {
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  // Deployments would only make new Pods: stop the controllers' work first by deleting them.
  const namespaces = (await core.listNamespace()).items.map((n) => n.metadata!.name!);
  const apps = cp.kubeConfig().makeApiClient(AppsV1Api);
  for (const namespace of namespaces) {
    await apps.deleteCollectionNamespacedDeployment({ namespace }).catch(() => {});
    await apps.deleteCollectionNamespacedReplicaSet({ namespace }).catch(() => {});
    await core.deleteCollectionNamespacedPod({ namespace, gracePeriodSeconds: 1 }).catch(() => {});
  }
  const deadline = Date.now() + 60_000;
  for (;;) {
    const left = await running().catch(() => []);
    if (left.length === 0) return;
    if (Date.now() > deadline)
      throw new Error(`the kubelet did not stop these containers within 60 s: ${left.join(', ')}`);
    await sleep(250);
  }
}

function containerdConfig(dir: string, socket: string, pauseImage: string): string {
  const q = (s: string): string => JSON.stringify(s);
  return `version = 2
root = ${q(join(dir, 'containerd/root'))}
state = ${q(join(dir, 'containerd/state'))}
[grpc]
  address = ${q(socket)}
[ttrpc]
  address = ${q(`${socket}.ttrpc`)}
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = ${q(join(dir, 'containerd/opt'))}
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ${q(pauseImage)}
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # Sandboxes here may lack CAP_SYS_RESOURCE, without which no process can lower its
  # oom_score_adj (the kubelet asks -998 for sandboxes): clamp to containerd's own instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = ${q(join(dir, 'runc'))}
  [plugins."io.containerd.grpc.v1.cri".registry]
    # Per-registry settings (NodeCluster.trustRegistry), read at each pull.
    config_path = ${q(join(dir, 'containerd/certs.d'))}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ${q(CNI_BIN)}
    conf_dir = ${q(join(dir, 'cni/net.d'))}
`;
}

function kubeconfig(cp: ControlPlane, user: { cert: string; key: string }): string {
  const b64 = (s: string): string => Buffer.from(s).toString('base64');
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'node', cluster: { server: cp.server, 'certificate-authority-data': b64(cp.caPem) } }],
    users: [{ name: 'node', user: { 'client-certificate-data': b64(user.cert), 'client-key-data': b64(user.key) } }],
    contexts: [{ name: 'node', context: { cluster: 'node', user: 'node' } }],
    'current-context': 'node',
  });
}

/** Polls `check` every 250 ms until it returns true; fails early if `proc` exits. */
async function waitFor(proc: Managed, what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let lastError: unknown;
  for (;;) {
    if (proc.exitStatus() !== null)
      throw new Error(`${proc.name} exited (${proc.exitStatus()}) while waiting for ${what}:\n${proc.logTail(40)}`);
    try {
      if (await check()) return;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${what}: not within ${READY_TIMEOUT_MS} ms (last error: ${(lastError as Error)?.message})\n--- ${proc.name} ---\n${proc.logTail(40)}`,
      );
    }
    await sleep(250);
  }
}
