// The cloud side of a node cluster, shared by test/e2e/node-e2e.test.ts and `demo --node`: the strict
// AWS, Azure and Google stand-ins listening where Pods reach the host, one set of identities
// (ServiceAccounts annotated for each cloud and for all three), and probe Pods in which the
// official Node.js SDKs ask for credentials (test/sdk/node/pod-probe.ts).
import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { CoreV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { createNamespace, createServiceAccount } from '../harness/control-plane.ts';
import type { NodeCluster } from '../harness/node.ts';
import { createAwsSts, type AwsSts } from '../sdk/aws-sts.ts';
import { createEntra, type Entra } from '../sdk/entra.ts';
import { createGoogleCloud, type GoogleCloud } from '../sdk/google.ts';
import { loadClusterIssuer } from '../sdk/oidc.ts';
import { startStandInServer, type StandInServer } from '../sdk/standin-server.ts';
import { helmUpgradeInstall } from './chart.ts';
import { AWS_ACCOUNT, CLIENT, GCP_EMAIL, POOL, PROJECT_NUMBER, TENANT, roleArn } from './identities.ts';
import { until } from '../harness/until.ts';

const REPO = resolve(import.meta.dirname, '../..');
export const SYSTEM_NS = 'wiw-system';
export const RELEASE = 'wiw';
export const FULLNAME = 'wiw-workload-identity-webhook';
export const ROLE = roleArn('on-the-node');
export { CLIENT, PROJECT_NUMBER, TENANT };
export const PROVIDER = `projects/${PROJECT_NUMBER}/locations/global/workloadIdentityPools/${POOL}/providers/node`;
export const EMAIL = GCP_EMAIL;
export const AZURE_USE = { 'azure.workload.identity/use': 'true' };

const AWS = { 'eks.amazonaws.com/role-arn': ROLE, 'eks.amazonaws.com/sts-regional-endpoints': 'true' };
const AZURE = { 'azure.workload.identity/client-id': CLIENT };
// pfnet's dialect; `direct`: the external_account file comes from the downward API (its default
// with an email, `gcloud`, adds a setup init container of a registry image this node never pulls).
const GCP = {
  'cloud.google.com/workload-identity-provider': PROVIDER,
  'cloud.google.com/service-account-email': EMAIL,
  'cloud.google.com/injection-mode': 'direct',
};

export type Cloud = 'aws' | 'azure' | 'gcp';

export interface ProbeReport {
  answer: { ok: boolean; error?: unknown; [key: string]: unknown };
  files: Record<
    string,
    { path: string; mode?: string; size?: number; sha256?: string; content?: string; error?: string }
  >;
}

export interface NodeClouds {
  namespace: string;
  standIn: StandInServer;
  sts: AwsSts;
  entra: Entra;
  google: GoogleCloud;
  subject(sa: string): string;
  principal(sa: string): string;
  /** A container running the official SDK of `cloud`, reporting through its termination message. */
  probe(cloud: Cloud, env?: Record<string, string>): V1Container;
  /** Creates the Pod, waits until it finished, returns each container's report. */
  runPod(
    name: string,
    serviceAccountName: string,
    containers: V1Container[],
    extra?: Partial<V1Pod['spec']>,
    labels?: Record<string, string>,
  ): Promise<Map<string, ProbeReport>>;
  stop(): Promise<void>;
}

/**
 * Stand-ins trusting the node cluster's issuer for the ServiceAccounts aws, azure, gcp, multi
 * (all three) and secret-reader of `namespace`, which this creates with the ServiceAccounts.
 */
export async function startNodeClouds(node: NodeCluster, namespace: string): Promise<NodeClouds> {
  const core = node.cp.kubeConfig().makeApiClient(CoreV1Api);
  const subject = (sa: string): string => `system:serviceaccount:${namespace}:${sa}`;
  const principal = (sa: string): string =>
    `principal://iam.googleapis.com/projects/${PROJECT_NUMBER}/locations/global/workloadIdentityPools/on-prem/subject/${subject(sa)}`;
  const issuer = await loadClusterIssuer(node.cp);
  const issuerHostPath = issuer.issuer.replace('https://', '');
  const dir = join(node.cp.dir, 'stand-ins');
  await mkdir(dir);
  const sts = createAwsSts({
    issuer,
    clientIds: ['sts.amazonaws.com'],
    roles: [
      {
        arn: ROLE,
        trustPolicy: {
          Version: '2012-10-17',
          Statement: [
            {
              Effect: 'Allow',
              Principal: { Federated: `arn:aws:iam::${AWS_ACCOUNT}:oidc-provider/${issuerHostPath}` },
              Action: 'sts:AssumeRoleWithWebIdentity',
              Condition: {
                StringEquals: {
                  [`${issuerHostPath}:sub`]: [subject('aws'), subject('multi'), subject('secret-reader')],
                  [`${issuerHostPath}:aud`]: 'sts.amazonaws.com',
                },
              },
            },
          ],
        },
      },
    ],
  });
  const entra = createEntra({
    issuer,
    applications: [
      {
        tenantId: TENANT,
        clientId: CLIENT,
        federatedCredentials: ['azure', 'multi'].map((sa) => ({
          issuer: issuer.issuer,
          subject: subject(sa),
          audiences: ['api://AzureADTokenExchange'],
        })),
      },
    ],
  });
  const google = createGoogleCloud({
    issuer,
    // pfnet's dialect asks tokens for sts.googleapis.com; its users allow that audience on the provider.
    providers: [{ name: PROVIDER, issuer: issuer.issuer, allowedAudiences: ['sts.googleapis.com'] }],
    serviceAccounts: [{ email: EMAIL, workloadIdentityUsers: [principal('gcp'), principal('multi')] }],
    projects: { [PROJECT_NUMBER]: 'my-project' },
  });
  // Where Pods reach the host: its address on their bridge.
  const standIn = await startStandInServer(dir, [sts, entra, google], { address: node.hostIp });

  await createNamespace(node.cp, namespace);
  for (const [name, annotations] of Object.entries({
    aws: AWS,
    azure: AZURE,
    gcp: GCP,
    multi: { ...AWS, ...AZURE, ...GCP },
  })) {
    await createServiceAccount(node.cp, namespace, name, annotations);
  }
  await createServiceAccount(node.cp, namespace, 'secret-reader');
  await createServiceAccount(node.cp, namespace, 'secret-consumer');
  // The stand-ins' CA, for NODE_EXTRA_CA_CERTS in the probes.
  await core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name: 'stand-in-ca' }, data: { 'ca.pem': await readFile(standIn.caFile, 'utf8') } },
  });

  const probe = (cloud: Cloud, env: Record<string, string> = {}): V1Container => ({
    name: cloud,
    image: node.images.base,
    imagePullPolicy: 'Never',
    command: ['node', '/wiw/test/sdk/node/pod-probe.ts', cloud],
    env: Object.entries({
      HOME: '/tmp',
      NODE_EXTRA_CA_CERTS: '/stand-in/ca.pem',
      WIW_SDK_STANDIN_ADDRESS: standIn.address,
      WIW_SDK_STANDIN_HOSTS: standIn.hosts.join(','),
      ...env,
    }).map(([name, value]) => ({ name, value })),
    volumeMounts: [
      { name: 'repo', mountPath: '/wiw', readOnly: true },
      { name: 'stand-in-ca', mountPath: '/stand-in', readOnly: true },
    ],
  });

  const runPod: NodeClouds['runPod'] = async (name, serviceAccountName, containers, extra = {}, labels = {}) => {
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name, labels },
        spec: {
          serviceAccountName,
          restartPolicy: 'Never',
          containers,
          ...extra,
          volumes: [
            // The SDKs and the probe come from the checkout, read-only.
            { name: 'repo', hostPath: { path: REPO, type: 'Directory' } },
            { name: 'stand-in-ca', configMap: { name: 'stand-in-ca' } },
            ...(extra?.volumes ?? []),
          ],
        },
      },
    });
    const pod = await until(
      `Pod ${name} to finish`,
      async () => {
        const p = await core.readNamespacedPod({ namespace, name });
        return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
      },
      120_000,
    );
    const reports = new Map<string, ProbeReport>();
    for (const status of pod.status?.containerStatuses ?? []) {
      const message = status.state?.terminated?.message ?? '';
      try {
        reports.set(status.name, JSON.parse(message) as ProbeReport);
      } catch {
        assert.fail(
          `container ${status.name} of Pod ${name} left no report (exit ${status.state?.terminated?.exitCode}): ${message}`,
        );
      }
    }
    assert.equal(reports.size, containers.length, `Pod ${name}: ${JSON.stringify(pod.status)}`);
    return reports;
  };

  return { namespace, standIn, sts, entra, google, subject, principal, probe, runPod, stop: () => standIn.stop() };
}

/** Where the chart comes from: the checkout with the locally built image, or a released chart. */
export type ChartSource = { kind: 'local' } | { kind: 'oci'; ref: string; version: string; plainHttp: boolean };

/**
 * `helm install` of the chart as a user would: from the checkout with the locally built image
 * (pullPolicy Never: nothing is pulled), or a released chart from a registry (`oci://`), whose
 * values name the released image by digest (pulled by the node's containerd).
 */
export async function installChart(
  node: NodeCluster,
  requestorNamespaces: string[],
  source: ChartSource = { kind: 'local' },
): Promise<void> {
  await createNamespace(node.cp, SYSTEM_NS, { 'pod-security.kubernetes.io/enforce': 'restricted' });
  const [repository, tag] = node.images.webhook.split(/:(?=[^:/]+$)/);
  const values = {
    ...(source.kind === 'local' ? { image: { repository, tag, pullPolicy: 'Never' } } : {}),
    config: { awsDefaultRegion: 'eu-west-1', azureTenantId: TENANT },
    // Its RoleBindings go into these, which must exist first.
    tokenRequestor: { enabled: true, namespaces: requestorNamespaces },
  };
  const chart =
    source.kind === 'oci'
      ? { ref: source.ref, args: ['--version', source.version, ...(source.plainHttp ? ['--plain-http'] : [])] }
      : undefined;
  await helmUpgradeInstall(node.cp, RELEASE, SYSTEM_NS, values, 'install', chart);
}
