// `npm run demo` (scripts/dev.sh demo): a local control plane with the webhook registered,
// the samples from examples/ applied, and a summary of what each Pod received.
// `npm run demo -- --node`: Pods that really run on a node instead (scripts/demo-node.ts).
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CoreV1Api, type V1Pod, type V1ServiceAccount } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { createNamespace, startControlPlane } from '../test/harness/control-plane.ts';
import { registerWebhook, startWebhook } from '../test/support/webhook.ts';
import { describeInjection, kubectlHint, shellQuote } from './demo-summary.ts';

if (process.argv.includes('--node')) {
  await import('./demo-node.ts');
  // It runs until Ctrl-C and exits by itself.
  await new Promise(() => {});
}

const EXAMPLES = resolve(import.meta.dirname, '../examples');
const bold = (s: string) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);

console.log('Starting etcd and kube-apiserver ...');
const cp = await startControlPlane({ name: 'demo' });
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  console.log('\nStopping the webhook and the control plane ...');
  await wh.stop().catch(() => {});
  await cp.stop();
  process.exit(0);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

console.log('Starting the webhook (serve --self-signed) and registering it ...');
const wh = await startWebhook(cp, ['--aws-default-region', 'eu-west-1']);
const core = cp.kubeConfig().makeApiClient(CoreV1Api);
await createNamespace(cp, 'demo');
await registerWebhook(
  cp,
  wh,
  'workload-identity-webhook',
  [
    {
      objectSelector: {
        matchExpressions: [
          { key: 'workload-identity-webhook.io/skip', operator: 'DoesNotExist' },
          { key: 'eks.amazonaws.com/skip-pod-identity-webhook', operator: 'DoesNotExist' },
        ],
      },
      namespaceSelector: {
        matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system'] }],
      },
    },
  ],
  'demo',
);

type Doc = { kind?: string; metadata?: { name?: string; namespace?: string } };
const docs: { file: string; doc: Doc }[] = [];
for (const file of readdirSync(EXAMPLES)
  .filter((f) => f.endsWith('.yaml'))
  .sort()) {
  for (const d of parseAllDocuments(readFileSync(join(EXAMPLES, file), 'utf8'))) {
    const doc = d.toJS() as Doc | null;
    if (doc) docs.push({ file, doc });
  }
}
for (const { doc } of docs.filter((d) => d.doc.kind === 'ServiceAccount')) {
  await core.createNamespacedServiceAccount({
    namespace: doc.metadata!.namespace ?? 'demo',
    body: doc as V1ServiceAccount,
  });
}

for (const { file, doc } of docs.filter((d) => d.doc.kind === 'Pod')) {
  const pod = await core.createNamespacedPod({ namespace: doc.metadata!.namespace ?? 'demo', body: doc as V1Pod });
  console.log(
    `\n${bold(`${pod.metadata!.namespace}/${pod.metadata!.name}`)}  (examples/${file}, ServiceAccount ${pod.spec!.serviceAccountName})`,
  );
  for (const line of describeInjection(doc as V1Pod, pod)) console.log(`  ${line}`);
}

console.log(`
${bold('The control plane keeps running.')} Try your own manifests:
  export KUBECONFIG=${shellQuote(cp.kubeconfigPath)}
${kubectlHint()}
  kubectl apply -f your-pod.yaml && kubectl get pod NAME -o yaml
  node dist/cli.js preview -f examples/aws.yaml        # the same decision, offline
Webhook log: ${wh.process.logPath}
Press Ctrl-C to stop and remove everything.`);
