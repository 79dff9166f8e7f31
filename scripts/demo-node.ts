// `npm run demo -- --node` (scripts/dev.sh demo --node): a real node on the local control plane,
// the chart installed with the image built from the Dockerfile, and a Pod of all three clouds
// whose official SDKs get credentials (from local stand-ins of the clouds' token services).
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { startNode } from '../test/harness/node.ts';
import {
  AZURE_USE,
  FULLNAME,
  SYSTEM_NS,
  installChart,
  startNodeClouds,
  type NodeClouds,
} from '../test/support/node-clouds.ts';
import { until } from '../test/support/webhook.ts';
import { kubectlHint, shellQuote } from './demo-summary.ts';

const bold = (s: string) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);

console.log('Starting a node: etcd, kube-apiserver, controller-manager, scheduler, containerd and a kubelet ...');
const started = Date.now();
const node = await startNode({ name: 'demo-node' });
let clouds: NodeClouds | undefined;
let stopping = false;
const stop = async (code = 0) => {
  if (stopping) return;
  stopping = true;
  console.log('\nStopping the Pods, the node and the control plane ...');
  await clouds?.stop().catch(() => {});
  await node.stop();
  process.exit(code);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());

try {
  console.log(
    `Node ${node.nodeName} Ready in ${((Date.now() - started) / 1000).toFixed(0)} s (images: ${node.images.webhook}, ${node.images.base}).`,
  );
  clouds = await startNodeClouds(node, 'demo');
  console.log(
    `helm install wiw charts/workload-identity-webhook --namespace ${SYSTEM_NS} (image ${node.images.webhook}, pullPolicy Never) ...`,
  );
  await installChart(node, ['demo']);
  const apps = node.cp.kubeConfig().makeApiClient(AppsV1Api);
  await until(
    'both webhook replicas Ready',
    async () =>
      (await apps.readNamespacedDeployment({ namespace: SYSTEM_NS, name: FULLNAME })).status?.readyReplicas === 2 ||
      undefined,
    180_000,
  );
  const core = node.cp.kubeConfig().makeApiClient(CoreV1Api);
  const pods = await core.listNamespacedPod({ namespace: SYSTEM_NS });
  for (const p of pods.items) console.log(`  ${p.metadata!.name}  ${p.status!.phase}  ${p.status!.podIP}`);

  console.log(
    `\nA Pod of ServiceAccount demo/multi (annotated for AWS, Azure and GCP), one container per cloud's SDK ...`,
  );
  const reports = await clouds.runPod(
    'multi',
    'multi',
    [clouds.probe('aws'), clouds.probe('azure'), clouds.probe('gcp')],
    {},
    AZURE_USE,
  );
  for (const [container, report] of reports) {
    console.log(`\n${bold(`container ${container}`)}`);
    for (const [variable, file] of Object.entries(report.files)) {
      console.log(`  ${variable}=${file.path}  (mode ${file.mode}, ${file.size} bytes, projected by the kubelet)`);
    }
    const a = report.answer;
    if (!a.ok) console.log(`  the SDK failed: ${JSON.stringify(a.error)}`);
    else if (container === 'aws')
      console.log(
        `  @aws-sdk/credential-providers: role credentials, access key ${a.accessKeyId}, expire ${a.expiration}`,
      );
    else if (container === 'azure') console.log(`  @azure/identity: access token of ${String(a.token).length} chars`);
    else
      console.log(`  google-auth-library (${a.client}): impersonated access token of ${String(a.token).length} chars`);
  }
  console.log(`
${bold('The node keeps running.')} Try your own manifests (imagePullPolicy: Never, image ${node.images.base}):
  export KUBECONFIG=${shellQuote(node.cp.kubeconfigPath)}
${kubectlHint()}
  kubectl get pods -A -o wide
Node logs: ${node.dir}/{kubelet,containerd,kube-controller-manager}.log
Press Ctrl-C to stop and remove everything.`);
} catch (err) {
  console.error(err);
  await stop(1);
}
