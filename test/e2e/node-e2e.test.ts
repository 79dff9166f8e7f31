// End to end on a real node, as a user runs it: the release command (`npm run release`) builds the
// image for linux/amd64 and linux/arm64 and pushes it with the chart to a real OCI registry on the
// loopback, signs both with a cosign key pair and attests the SBOM; cosign verifies the signatures
// and the SBOM with the public key, then `helm install oci://…` installs that chart, and the node's
// containerd pulls the image by the index digest the chart was released with. Then both replicas Ready, the self-managed
// certificate made in-cluster and the caBundle patched, and Pods that really start: inside them
// the official Node.js SDKs get credentials from the strict cloud stand-ins, reading the files
// the kubelet projected at the paths the injected env vars name.
// `helm test` proves the live install injects: its hook Pod checks its own injected role and token.
// Then the upgrade to the next release with the commands docs/install.md gives, while Pods are
// being created. Last, the operator's view: an alert's expression evaluated by Prometheus's engine
// over scrapes of the webhook Pods, what each webhook.scope does to Pod creation while the webhook
// is scaled to 0, and the uninstall as documented.
// `doctor` is the built CLI of this checkout (test/harness/cli-process.ts).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AdmissionregistrationV1Api, ApiextensionsV1Api, AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { Release } from '../../scripts/release.ts';
import { runCliAsync } from '../harness/cli-process.ts';
import { imageTools, mountImage } from '../harness/node-images.ts';
import { startNode, type NodeCluster } from '../harness/node.ts';
import { evaluate, type Scrape } from '../harness/promql.ts';
import { CHART, helm, type Manifest } from '../support/chart.ts';
import { renderedRuleGroups } from '../support/observability.ts';
import { MEDIA, startRegistry, type LocalRegistry } from '../harness/registry.ts';
import { tokenDigest } from '../sdk/oidc.ts';
import {
  AZURE_USE,
  EMAIL,
  FULLNAME,
  PROVIDER,
  RELEASE,
  ROLE,
  SYSTEM_NS,
  TENANT,
  installChart,
  startNodeClouds,
  type NodeClouds,
  type ProbeReport,
} from '../support/node-clouds.ts';
import { type KeyPair, type Verified, cosignKeyPair, runRelease, verifyWithKey } from '../support/release.ts';
import {
  NEXT_CRD_COLUMN,
  documentedBlocks,
  installPlaceholders,
  nextReleaseCheckout,
  runDocumented,
  substitute,
} from '../support/upgrade.ts';
import { until } from '../harness/until.ts';

const NS = 'apps';
const SECRET_MOUNT = '/var/run/secrets/gardener.cloud/workload-identity';

const REPO = join(import.meta.dirname, '../..');
const VERSION = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;

let node: NodeCluster;
let registry: LocalRegistry;
let released: Release;
let clouds: NodeClouds;
let core: CoreV1Api;
let apps: AppsV1Api;
let keys: KeyPair;
let sbomFile: string;
/** What cosign verified before the install: the image index (signature and SBOM) and the chart. */
let verified: { image: Verified; chart: Verified };

before(async () => {
  [node, registry, keys] = await Promise.all([startNode({ name: 'node-e2e' }), startRegistry(), cosignKeyPair()]);
  core = node.cp.kubeConfig().makeApiClient(CoreV1Api);
  apps = node.cp.kubeConfig().makeApiClient(AppsV1Api);
  await node.trustRegistry(registry.host);
  sbomFile = join(dirname(keys.key), 'sbom.cdx.json');
  [released, clouds] = await Promise.all([
    runRelease(`${registry.host}/wiw`, { sign: keys, sbom: sbomFile }),
    startNodeClouds(node, NS),
  ]);
  // As a user would before installing: cosign refuses (and so stops the install) unless both
  // artefacts carry a signature of the release key and the index its SBOM attestation.
  verified = {
    image: await verifyWithKey(`${released.image.repository}@${released.image.digest}`, keys.pub, { sbom: true }),
    chart: await verifyWithKey(`${released.chart.reference.replace('oci://', '')}@${released.chart.digest}`, keys.pub, {
      sbom: false,
    }),
  };
  await installChart(node, [NS], {
    kind: 'oci',
    ref: released.chart.reference,
    version: released.chart.version,
    plainHttp: true,
  });
});

after(async () => {
  await clouds?.stop();
  await node?.stop();
  await registry?.stop();
});

const ARCHES = { 'linux/amd64': 'amd64', 'linux/arm64': 'arm64' } as const;

describe('the release, pushed to a real OCI registry', () => {
  test('an OCI index lists linux/amd64 and linux/arm64, each the root filesystem of its architecture plus the bundle; the image the tests run is the one released', async (t) => {
    const repository = 'wiw/workload-identity-webhook';
    const built = await imageTools().provide();
    const hostArch = ({ x64: 'amd64', arm64: 'arm64' } as Record<string, string>)[process.arch];
    const layers: Record<string, string[]> = {};
    assert.equal(released.version, VERSION);
    assert.equal(released.image.repository, `${registry.host}/${repository}`);
    const index = await registry.manifest(repository, VERSION);
    assert.equal(index.digest, released.image.digest, 'the tag is the index the release printed');
    assert.equal(index.body.mediaType, MEDIA.index);
    const platforms = (
      index.body.manifests as { digest: string; mediaType: string; platform: Record<string, string> }[]
    ).map((m) => [`${m.platform.os}/${m.platform.architecture}`, m.digest, m.mediaType, m.platform.variant]);
    assert.deepEqual(platforms, [
      ['linux/amd64', released.image.platforms['linux/amd64'], MEDIA.manifest, undefined],
      ['linux/arm64', released.image.platforms['linux/arm64'], MEDIA.manifest, 'v8'],
    ]);
    for (const [platform, arch] of Object.entries(ARCHES)) {
      const manifest = await registry.manifest(repository, released.image.platforms[platform]);
      const config = await registry.blobJson(repository, manifest.body.config.digest);
      assert.equal(config.architecture, arch, platform);
      assert.equal(config.os, 'linux');
      assert.equal(config.config.Labels['org.opencontainers.image.version'], VERSION);
      assert.deepEqual(config.config.Entrypoint, ['/usr/local/bin/node', '/app/dist/cli.js']);
      // Two layers: the root filesystem of the architecture, then the bundle, the same for both.
      assert.equal(config.rootfs.diff_ids.length, 2);
      layers[arch] = config.rootfs.diff_ids;
      // The release builds as the tests' image is built (scripts/build-image.sh, reproducible):
      // this machine's platform is the very image provide-images.sh built and the node runs.
      if (arch === hostArch) assert.equal(manifest.body.config.digest, built.WEBHOOK_IMAGE_ID, `${platform} image`);
      const compressed = (manifest.body.layers as { size: number }[]).reduce((n, l) => n + l.size, 0);
      const size = await uncompressedSize(arch);
      t.diagnostic(
        `${platform}: ${(size / 1e6).toFixed(1)} MB uncompressed, ${(compressed / 1e6).toFixed(1)} MB pushed`,
      );
    }
    assert.equal(layers.amd64[1], layers.arm64[1], 'one bundle for both');
    assert.notEqual(layers.amd64[0], layers.arm64[0]);
  });

  test("the chart is an OCI artefact: its version and appVersion are package.json's, its image the index digest", async () => {
    const repository = 'wiw/charts/workload-identity-webhook';
    assert.equal(released.chart.reference, `oci://${registry.host}/${repository}`);
    const chart = await registry.manifest(repository, VERSION);
    assert.equal(chart.digest, released.chart.digest);
    assert.equal(chart.body.config.mediaType, 'application/vnd.cncf.helm.config.v1+json');
    const meta = await registry.blobJson(repository, chart.body.config.digest);
    assert.equal(meta.version, VERSION);
    assert.equal(meta.appVersion, VERSION);
    assert.match(
      meta.annotations['artifacthub.io/images'],
      new RegExp(`image: ${registry.host}/wiw/workload-identity-webhook:${VERSION}@${released.image.digest}\\n`),
    );
  });
});

describe('the release signed, with its SBOM, verified before the install', () => {
  test('cosign verified the signature of the release key on the index and on the chart, each by its digest', () => {
    assert.equal(released.signatures?.signer, 'key');
    for (const [what, digest] of [
      ['image', released.image.digest],
      ['chart', released.chart.digest],
    ] as const) {
      const signed = verified[what].signatures.filter((s) => s.critical.type === 'https://sigstore.dev/cosign/sign/v1');
      assert.deepEqual(
        signed.map((s) => s.critical.image['docker-manifest-digest']),
        [digest],
        `${what}: one signature, of the released digest`,
      );
    }
  });

  test('the SBOM attested on the index is the CycloneDX file the release wrote: the bundled dependencies and the inputs of the root filesystem', () => {
    assert.equal(verified.image.sboms.length, 1);
    const [statement] = verified.image.sboms;
    assert.equal(statement.predicateType, 'https://cyclonedx.org/bom');
    assert.deepEqual(
      statement.subject.map((s) => `sha256:${s.digest.sha256}`),
      [released.image.digest],
    );
    const sbom = statement.predicate as {
      bomFormat: string;
      metadata: { component: { name: string; version: string } };
      components: { name: string; version: string; purl: string }[];
    };
    assert.deepEqual(sbom, JSON.parse(readFileSync(sbomFile, 'utf8')), 'the attested SBOM is the one --sbom wrote');
    assert.equal(sbom.bomFormat, 'CycloneDX');
    assert.deepEqual(sbom.metadata.component, {
      ...sbom.metadata.component,
      name: 'workload-identity-webhook',
      version: VERSION,
    });
    const listed = new Set(sbom.components.map((c) => `${c.name}@${c.version}`));
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    const lock = JSON.parse(readFileSync(join(REPO, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version: string; dev?: boolean }>;
    };
    for (const name of Object.keys(pkg.dependencies))
      assert.ok(listed.has(`${name}@${lock.packages[`node_modules/${name}`].version}`), `${name} is listed`);
    // What only the tests and the build use is not (a dev dependency a production one needs is).
    const devOnly = Object.keys(pkg.devDependencies).filter((name) => lock.packages[`node_modules/${name}`].dev);
    assert.ok(devOnly.includes('esbuild'));
    for (const name of devOnly)
      assert.ok(![...listed].some((c) => c.startsWith(`${name}@`)), `the dev dependency ${name} is not`);
    // Node.js and the C libraries of each platform's root filesystem, as the lock pins them.
    const pins = readFileSync(join(REPO, 'scripts/runtime-base.lock'), 'utf8')
      .split('\n')
      .filter((l) => /^(node|deb) /.test(l))
      .map((l) => l.split(/\s+/));
    assert.ok(pins.length > 0);
    for (const [, , name, version] of pins) assert.ok(listed.has(`${name}@${version}`), `${name} ${version} is listed`);
    assert.equal(released.signatures?.sbom.components, sbom.components.length);
  });

  test('another key verifies neither the image nor the chart', async () => {
    const other = await cosignKeyPair();
    for (const ref of [
      `${released.image.repository}@${released.image.digest}`,
      `${released.chart.reference.replace('oci://', '')}@${released.chart.digest}`,
    ])
      await assert.rejects(verifyWithKey(ref, other.pub, { sbom: false }), /no matching signatures|failed to verify/);
  });
});

const digest = (report: ProbeReport, variable: string): string => {
  const file = report.files[variable];
  assert.ok(file && !file.error && file.sha256, `${variable}: ${JSON.stringify(file)}`);
  return file.sha256!;
};
/** tokenDigest of a file the probe only reported by its sha256: compare on the same function. */
const sameToken = (fileSha256: string, seen: string): boolean =>
  // tokenDigest is the first 16 hex digits of the sha256 of the trimmed token; files hold no newline.
  fileSha256.slice(0, 16) === seen;

function checkAws(report: ProbeReport, sa: string): void {
  assert.ok(report.answer.ok, JSON.stringify(report));
  const exchange = clouds.sts.exchanges.find((e) => e.accessKeyId === report.answer.accessKeyId);
  assert.ok(exchange, 'the SDK returned credentials the stand-in issued');
  assert.equal(exchange.subject, clouds.subject(sa));
  assert.equal(exchange.roleArn, ROLE);
  assert.equal(exchange.host, 'sts.eu-west-1.amazonaws.com');
  assert.ok(
    sameToken(digest(report, 'AWS_WEB_IDENTITY_TOKEN_FILE'), exchange.tokenDigest),
    'the stand-in saw the token the kubelet projected',
  );
}

function checkAzure(report: ProbeReport, sa: string): void {
  assert.ok(report.answer.ok, JSON.stringify(report));
  const exchange = clouds.entra.exchanges.find((e) => e.accessToken === report.answer.token);
  assert.ok(exchange, 'the SDK returned a token the stand-in issued');
  assert.equal(exchange.subject, clouds.subject(sa));
  assert.equal(exchange.tenantId, TENANT);
  assert.ok(sameToken(digest(report, 'AZURE_FEDERATED_TOKEN_FILE'), exchange.tokenDigest));
}

function checkGcp(report: ProbeReport, sa: string): void {
  assert.ok(report.answer.ok, JSON.stringify(report));
  const impersonation = clouds.google.impersonations.find((i) => i.accessToken === report.answer.token);
  assert.ok(impersonation, 'the SDK returned the impersonated access token');
  assert.equal(impersonation.principal, clouds.principal(sa));
  assert.equal(impersonation.email, EMAIL);
  // The external_account file the downward API delivered, complete.
  const file = report.files.GOOGLE_APPLICATION_CREDENTIALS;
  assert.ok(file?.content, JSON.stringify(file));
  const config = JSON.parse(file.content) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  assert.equal(config.type, 'external_account');
  assert.equal(config.audience, `//iam.googleapis.com/${PROVIDER}`);
  assert.equal(config.subject_token_type, 'urn:ietf:params:oauth:token-type:jwt');
  assert.equal(config.token_url, 'https://sts.googleapis.com/v1/token');
  assert.equal(
    config.service_account_impersonation_url,
    `https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${EMAIL}:generateAccessToken`,
  );
  assert.equal(typeof config.credential_source?.file, 'string');
  const exchange = clouds.google.exchanges.find((e) => e.principal === clouds.principal(sa));
  assert.ok(exchange);
}

/**
 * Creates Pods back to back until `over()` answers true, then 10 more; returns the names created
 * and the refusals. Pods held by a scheduling gate: admitted and stored, never started.
 */
async function createPodsUntil(
  prefix: string,
  over: () => boolean | Promise<boolean>,
  limit = 3000,
): Promise<{ created: string[]; failures: string[] }> {
  const created: string[] = [];
  const failures: string[] = [];
  for (let i = 0, after = 0; after < 10 && i < limit; i++) {
    if (await over()) after++;
    const name = `${prefix}-${i}`;
    try {
      await core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: { name },
          spec: {
            serviceAccountName: 'aws',
            schedulingGates: [{ name: 'example.com/hold' }],
            containers: [{ name: 'app', image: node.images.base, imagePullPolicy: 'Never' }],
          },
        },
      });
      created.push(name);
    } catch (err) {
      failures.push(`${name}: ${(err as Error).message}`);
    }
  }
  return { created, failures };
}

/** Each of these Pods was mutated: its container has the AWS role of its ServiceAccount. */
async function assertMutated(names: string[]): Promise<void> {
  for (const name of names) {
    const pod = await core.readNamespacedPod({ namespace: NS, name });
    const env = Object.fromEntries((pod.spec!.containers[0].env ?? []).map((e) => [e.name, e.value]));
    assert.equal(env.AWS_ROLE_ARN, ROLE, `Pod ${name} was mutated`);
  }
}

describe('the chart installed on a real node', () => {
  test('both webhook replicas become Ready, from the released image containerd pulled by digest', async () => {
    const deployment = await until(
      'both webhook replicas Ready',
      async () => {
        const d = await apps.readNamespacedDeployment({ namespace: SYSTEM_NS, name: FULLNAME });
        return d.status?.readyReplicas === 2 ? d : undefined;
      },
      180_000,
    ).catch(async (err: Error) => {
      const pods = await core.listNamespacedPod({ namespace: SYSTEM_NS });
      throw new Error(
        `${err.message}\n${JSON.stringify(
          pods.items.map((p) => ({ name: p.metadata?.name, status: p.status?.containerStatuses })),
          null,
          1,
        )}`,
      );
    });
    const pods = (
      await core.listNamespacedPod({ namespace: SYSTEM_NS, labelSelector: 'app.kubernetes.io/component=webhook' })
    ).items;
    assert.equal(pods.length, 2);
    const image = `${released.image.repository}@${released.image.digest}`;
    for (const pod of pods) {
      assert.equal(pod.spec?.nodeName, node.nodeName);
      assert.equal(pod.spec?.containers[0].image, image, 'the chart names the image by the released digest');
      assert.equal(pod.status?.containerStatuses?.[0].imageID, image);
      assert.equal(pod.status?.containerStatuses?.[0].ready, true);
      assert.equal(pod.spec?.containers[0].securityContext?.readOnlyRootFilesystem, true);
    }
    assert.equal(deployment.spec?.template.spec?.containers[0].imagePullPolicy, 'IfNotPresent');
    // containerd fetched the index by its digest from the registry, then this platform's manifest.
    const pulls = registry
      .accessLog()
      .filter((e) => e.method === 'GET' && e.status === 200 && e.userAgent.startsWith('containerd/'))
      .map((e) => e.path);
    assert.ok(pulls.includes(`/v2/wiw/workload-identity-webhook/manifests/${released.image.digest}`), pulls.join('\n'));
    const here = `linux/${process.arch === 'arm64' ? 'arm64' : 'amd64'}`;
    assert.ok(pulls.includes(`/v2/wiw/workload-identity-webhook/manifests/${released.image.platforms[here]}`));
  });

  test('the self-managed certificate is created in the cluster and the caBundle patched with it', async () => {
    const admission = node.cp.kubeConfig().makeApiClient(AdmissionregistrationV1Api);
    const secret = await until(
      'the certificate Secret',
      () => core.readNamespacedSecret({ namespace: SYSTEM_NS, name: `${FULLNAME}-certs` }),
      60_000,
    );
    const ca = Buffer.from(secret.data!['ca.crt'], 'base64').toString('utf8');
    assert.match(ca, /^-----BEGIN CERTIFICATE-----/);
    const config = await until(
      'caBundle patched',
      async () => {
        const c = await admission.readMutatingWebhookConfiguration({ name: FULLNAME });
        return c.webhooks?.every((w) => w.clientConfig.caBundle) ? c : undefined;
      },
      60_000,
    );
    for (const webhook of config.webhooks!) {
      assert.equal(Buffer.from(webhook.clientConfig.caBundle!, 'base64').toString('utf8'), ca);
      assert.equal(webhook.clientConfig.service?.name, FULLNAME);
    }
  });

  test('an AWS Pod starts; inside it the AWS SDK assumes the role with the projected token', async () => {
    const reports = await clouds.runPod('aws', 'aws', [clouds.probe('aws')]);
    checkAws(reports.get('aws')!, 'aws');
  });

  test('helm test passes: its hook Pod, run on the node, finds the role and token the live webhook injected', async () => {
    const out = await helm(['test', RELEASE, '--namespace', SYSTEM_NS, '--timeout', '3m'], {
      kubeconfig: node.cp.kubeconfigPath,
    });
    assert.match(out, new RegExp(`TEST SUITE: +${FULLNAME}-test\\n`));
    assert.match(out, /Phase: +Succeeded/);
    assert.doesNotMatch(out, /Phase: +Failed/);
    // hook-succeeded: the Pod and its ServiceAccount are gone from the namespace it ran in.
    await until(
      'the test Pod deleted',
      async () =>
        (await core.listNamespacedPod({ namespace: 'default' })).items.some(
          (p) => p.metadata?.name === `${FULLNAME}-test`,
        )
          ? undefined
          : true,
      60_000,
    );
  });

  test('an Azure Pod starts; inside it @azure/identity gets a token with the projected assertion', async () => {
    const reports = await clouds.runPod('azure', 'azure', [clouds.probe('azure')], {}, AZURE_USE);
    checkAzure(reports.get('azure')!, 'azure');
  });

  test('a GCP Pod starts; inside it google-auth-library reads the downward-API external_account file and impersonates', async () => {
    const reports = await clouds.runPod('gcp', 'gcp', [clouds.probe('gcp')]);
    checkGcp(reports.get('gcp')!, 'gcp');
  });

  test("a multi-cloud Pod starts; each container gets credentials from all three clouds' SDKs", async () => {
    const reports = await clouds.runPod(
      'multi',
      'multi',
      [clouds.probe('aws'), clouds.probe('azure'), clouds.probe('gcp')],
      {},
      AZURE_USE,
    );
    checkAws(reports.get('aws')!, 'multi');
    checkAzure(reports.get('azure')!, 'multi');
    checkGcp(reports.get('gcp')!, 'multi');
  });

  test('a labelled Secret gets its token from the in-cluster token requestor; a Pod using it through a volume assumes the role', async () => {
    await core.createNamespacedSecret({
      namespace: NS,
      body: {
        metadata: {
          name: 'aws-credentials',
          labels: { 'workload-identity-webhook.io/provider': 'aws' },
          annotations: { 'workload-identity-webhook.io/service-account': 'secret-reader' },
        },
        data: { config: Buffer.from(JSON.stringify({ roleARN: ROLE })).toString('base64') },
      },
    });
    const secret = await until(
      'the in-cluster token requestor to write the token',
      async () => {
        const s = await core.readNamespacedSecret({ namespace: NS, name: 'aws-credentials' });
        return s.data?.token ? s : undefined;
      },
      90_000,
    );
    const token = Buffer.from(secret.data!.token, 'base64').toString('utf8');
    const reports = await clouds.runPod(
      'uses-secret',
      'secret-consumer',
      [
        {
          ...clouds.probe('aws', { AWS_CONFIG_FILE: `${SECRET_MOUNT}/credentialsFile` }),
          volumeMounts: [
            ...clouds.probe('aws').volumeMounts!,
            { name: 'credentials', mountPath: SECRET_MOUNT, readOnly: true },
          ],
        },
      ],
      { volumes: [{ name: 'credentials', secret: { secretName: 'aws-credentials' } }] },
    );
    const report = reports.get('aws')!;
    assert.ok(report.answer.ok, JSON.stringify(report));
    const exchange = clouds.sts.exchanges.find((e) => e.accessKeyId === report.answer.accessKeyId);
    assert.ok(exchange);
    assert.equal(exchange.subject, clouds.subject('secret-reader'));
    assert.equal(exchange.tokenDigest, tokenDigest(token));
    assert.match(report.files.AWS_CONFIG_FILE.content!, new RegExp(`web_identity_token_file = ${SECRET_MOUNT}/token`));
  });

  test('deleting one webhook Pod while Pods are being created loses no admission', async () => {
    const webhookPods = (
      await core.listNamespacedPod({ namespace: SYSTEM_NS, labelSelector: 'app.kubernetes.io/component=webhook' })
    ).items;
    assert.equal(webhookPods.length, 2);
    const victim = webhookPods[0].metadata!.name!;
    await core.deleteNamespacedPod({ namespace: SYSTEM_NS, name: victim });
    const victimExists = async (): Promise<boolean> =>
      core.readNamespacedPod({ namespace: SYSTEM_NS, name: victim }).then(
        () => true,
        () => false,
      );
    // From the deletion until the Pod is gone (its drain and termination), and some more after.
    const { created, failures } = await createPodsUntil('admitted', async () => !(await victimExists()), 2000);
    assert.equal(await victimExists(), false, 'the deleted webhook Pod is gone');
    assert.deepEqual(failures, []);
    await assertMutated(created);
    assert.ok(created.length > 10, `${created.length} Pods created`);
  });
});

describe('upgrading to the next release with the documented commands', () => {
  const POLICY_CRD = 'workloadidentitypolicies.workload-identity-webhook.io';
  const POLICIES = '/apis/workload-identity-webhook.io/v1alpha1/workloadidentitypolicies';
  let next: { dir: string; version: string };
  let upgrade: Release;
  /** docs/install.md's upgrade commands, with the local registry, the versions and this release's names. */
  let documented: string;
  const oldImage = () => `${released.image.repository}@${released.image.digest}`;
  const newImage = () => `${upgrade.image.repository}@${upgrade.image.digest}`;

  const crdColumns = async (): Promise<string[]> => {
    const crd = await node.cp
      .kubeConfig()
      .makeApiClient(ApiextensionsV1Api)
      .readCustomResourceDefinition({ name: POLICY_CRD });
    return (crd.spec.versions[0].additionalPrinterColumns ?? []).map((c) => c.name);
  };
  const deploymentImage = (manifests: string, name: string): string | undefined =>
    parseAllDocuments(manifests)
      .map((d) => d.toJS() as { kind?: string; metadata?: { name: string }; spec?: any }) // eslint-disable-line @typescript-eslint/no-explicit-any
      .find((m) => m?.kind === 'Deployment' && m.metadata?.name === name)?.spec.template.spec.containers[0].image;
  /** Both webhook replicas Ready on `image`, and no other left. */
  const rolledOutTo = (image: string) =>
    until(
      'the rolling update to the new digest to finish',
      async () => {
        const pods = (
          await core.listNamespacedPod({ namespace: SYSTEM_NS, labelSelector: 'app.kubernetes.io/component=webhook' })
        ).items;
        const done =
          pods.length === 2 &&
          pods.every(
            (p) =>
              !p.metadata?.deletionTimestamp &&
              p.spec?.containers[0].image === image &&
              p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
          );
        return done ? pods : undefined;
      },
      240_000,
    );

  before(async () => {
    next = await nextReleaseCheckout();
    const started = Date.now();
    upgrade = await runRelease(`${registry.host}/wiw`, { repo: next.dir });
    process.stderr.write(
      `node-e2e: the next release (${next.version}) built and pushed in ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
    );
    documented = substitute(
      (await documentedBlocks('3. Upgrade'))[0] ?? '',
      installPlaceholders({
        chartRef: upgrade.chart.reference,
        plainHttp: true,
        version: next.version,
        release: RELEASE,
        namespace: SYSTEM_NS,
      }),
    );
  });

  test('N+1 is another image and chart, released by the same command', () => {
    assert.equal(upgrade.version, next.version);
    assert.notEqual(upgrade.image.digest, released.image.digest);
    assert.notEqual(upgrade.chart.digest, released.chart.digest);
  });

  test('with --reuse-values instead of the documented flag, helm would keep the image of N', async () => {
    const helmUpgrade = documented
      .replace(/\\\n\s*/g, '')
      .split('\n')
      .find((l) => l.startsWith('helm upgrade'));
    assert.ok(helmUpgrade, documented);
    const reused = await runDocumented(
      `${helmUpgrade.replace(/ --(reset-then-)?reuse-values\b/, '')} --reuse-values --dry-run`,
      node.cp.kubeconfigPath,
    );
    const manifest = reused.slice(reused.indexOf('MANIFEST:') + 'MANIFEST:'.length, reused.indexOf('\nNOTES:'));
    assert.equal(deploymentImage(manifest, FULLNAME), oldImage());
  });

  test('the documented commands, while Pods are created back to back: N+1 rolls out and no Pod is refused', async (t) => {
    // A policy made under N, to be kept through the upgrade (and left by the uninstall below).
    const policy = await node.cp.request('POST', POLICIES, {
      apiVersion: 'workload-identity-webhook.io/v1alpha1',
      kind: 'WorkloadIdentityPolicy',
      metadata: { name: 'kept' },
      spec: {},
    });
    assert.equal(policy.status, 201, policy.body);
    assert.ok(!(await crdColumns()).includes(NEXT_CRD_COLUMN));

    // From before the upgrade until the rollout is over, and some more.
    let rolledOut = false;
    const creating = createPodsUntil('upgrading', () => rolledOut);
    let refusals: { created: string[]; failures: string[] };
    try {
      t.diagnostic(await runDocumented(documented, node.cp.kubeconfigPath));
      const upgraded = await apps.readNamespacedDeployment({ namespace: SYSTEM_NS, name: FULLNAME });
      assert.equal(upgraded.spec!.template.spec!.containers[0].image, newImage(), 'the documented upgrade sets N+1');
      await rolledOutTo(newImage());
    } finally {
      rolledOut = true;
      refusals = await creating;
    }
    const { created, failures } = refusals;
    assert.deepEqual(failures, [], 'no Pod refused during the rolling update');
    assert.ok(created.length > 20, `${created.length} Pods created`);
    await assertMutated(created);
    t.diagnostic(`${created.length} Pods created during the upgrade, 0 refused`);
  });

  test('after it: containerd runs the new digest, the values given at install are kept, the CRD of N+1 is served with the policy made under N', async () => {
    const pods = (
      await core.listNamespacedPod({ namespace: SYSTEM_NS, labelSelector: 'app.kubernetes.io/component=webhook' })
    ).items;
    assert.equal(pods.length, 2);
    for (const pod of pods) assert.equal(pod.status?.containerStatuses?.[0].imageID, newImage());
    const deployment = await apps.readNamespacedDeployment({ namespace: SYSTEM_NS, name: FULLNAME });
    const env = Object.fromEntries(
      (deployment.spec!.template.spec!.containers[0].env ?? []).map((e) => [e.name, e.value]),
    );
    assert.equal(env.WIW_AWS_DEFAULT_REGION, 'eu-west-1', 'config.awsDefaultRegion from the install is kept');
    const requestor = await apps.readNamespacedDeployment({
      namespace: SYSTEM_NS,
      name: `${FULLNAME}-token-requestor`,
    });
    assert.equal(requestor.spec!.template.spec!.containers[0].image, newImage(), 'tokenRequestor.enabled is kept');
    const history = await helm(['history', RELEASE, '--namespace', SYSTEM_NS, '-o', 'json'], {
      kubeconfig: node.cp.kubeconfigPath,
    });
    assert.deepEqual(
      (JSON.parse(history) as { chart: string; status: string }[]).map((r) => [r.chart, r.status]),
      [
        [`workload-identity-webhook-${VERSION}`, 'superseded'],
        [`workload-identity-webhook-${next.version}`, 'deployed'],
      ],
    );
    assert.ok((await crdColumns()).includes(NEXT_CRD_COLUMN), 'the CRD of N+1 is applied');
    assert.equal((await node.cp.request('GET', `${POLICIES}/kept`)).status, 200);
  });
});

describe('operating it: alerts over real scrapes, and the blast radius of each scope', () => {
  const webhookPods = async () =>
    (await core.listNamespacedPod({ namespace: SYSTEM_NS, labelSelector: 'app.kubernetes.io/component=webhook' }))
      .items;
  const ready = (pod: Awaited<ReturnType<typeof webhookPods>>[number]) =>
    !pod.metadata?.deletionTimestamp && pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
  /** What the Prometheus operator scrapes through the ServiceMonitor: each webhook Pod's metrics port. */
  const scrapeWebhooks = async (): Promise<Scrape[]> =>
    Promise.all(
      (await webhookPods()).filter(ready).map(async (pod) => ({
        timeMs: Date.now(),
        labels: { namespace: SYSTEM_NS, job: FULLNAME, pod: pod.metadata!.name! },
        body: await (await fetch(`http://${pod.status!.podIP}:9090/metrics`)).text(),
      })),
    );
  const held = (name: string, serviceAccountName: string, labels: Record<string, string> = {}) => ({
    metadata: { name, labels },
    spec: {
      serviceAccountName,
      // Admitted and stored, never started.
      schedulingGates: [{ name: 'example.com/hold' }],
      containers: [{ name: 'app', image: node.images.base, imagePullPolicy: 'Never' }],
    },
  });

  test("the denial alert's expression fires over scrapes of the webhook Pods once Pods are denied, not before", async () => {
    const [rule] = (await renderedRuleGroups())[0].rules.filter(
      (r) => r.alert === 'WorkloadIdentityWebhookDenialsRising',
    );
    await core.createNamespacedServiceAccount({
      namespace: NS,
      // A malformed role-arn only warns outside --strict (as the peer admits it); a malformed role-arns list is refused.
      body: { metadata: { name: 'malformed', annotations: { 'eks.amazonaws.com/role-arns': 'not-a-profile' } } },
    });
    // The previous test replaced a replica: both Ready again first, so every scrape sees the same two.
    await until(
      'both webhook replicas Ready',
      async () => (await webhookPods()).filter(ready).length === 2 || undefined,
      120_000,
    );
    const scrapes = await scrapeWebhooks();
    assert.equal(scrapes.length, 2);
    for (let i = 0; i < 4; i++) await core.createNamespacedPod({ namespace: NS, body: held(`allowed-${i}`, 'aws') });
    scrapes.push(...(await scrapeWebhooks()));
    assert.deepEqual(await evaluate(scrapes, rule.expr, scrapes.at(-1)!.timeMs), [], 'nothing denied yet');
    // Two rounds: a denial series new in one scrape has its second sample in the next.
    for (const round of [0, 1]) {
      for (let i = 0; i < 4; i++) {
        await assert.rejects(
          core.createNamespacedPod({ namespace: NS, body: held(`denied-${round}-${i}`, 'malformed') }),
          /eks\.amazonaws\.com\/role-arns/,
        );
      }
      scrapes.push(...(await scrapeWebhooks()));
    }
    const fired = await evaluate(scrapes, rule.expr, scrapes.at(-1)!.timeMs);
    assert.deepEqual(
      fired.map((f) => f.labels),
      [{ namespace: SYSTEM_NS }],
    );
    assert.ok(fired[0].value > 0.1, `denied fraction ${fired[0].value}`);
  });

  test('Pods started while the webhook is down with failurePolicy Ignore: doctor lists exactly them; after doctor --fix --yes with the webhook back, their replacements run with their identity', async () => {
    const policy = (failurePolicy: string) =>
      helm(
        [
          'upgrade',
          RELEASE,
          CHART,
          '--namespace',
          SYSTEM_NS,
          '--reuse-values',
          '--set',
          `webhook.failurePolicy=${failurePolicy}`,
        ],
        { kubeconfig: node.cp.kubeconfigPath },
      );
    const doctor = async (...extra: string[]) => {
      const run = await runCliAsync(['doctor', '--kubeconfig', node.cp.kubeconfigPath, '-o', 'json', ...extra]);
      return (
        JSON.parse(run.stdout) as { checks: { id: string; subject?: string; verdict: string; message: string }[] }
      ).checks;
    };
    const slippedPods = (checks: Awaited<ReturnType<typeof doctor>>) => checks.filter((c) => c.id === 'slipped-pod');
    const running = async () =>
      (await core.listNamespacedPod({ namespace: NS, labelSelector: 'app=slipped' })).items.filter(
        (p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp,
      );
    await policy('Ignore');
    await apps.replaceNamespacedDeploymentScale({
      namespace: SYSTEM_NS,
      name: FULLNAME,
      body: { metadata: { name: FULLNAME, namespace: SYSTEM_NS }, spec: { replicas: 0 } },
    });
    await until('no webhook Pod left', async () => ((await webhookPods()).length === 0 ? true : undefined), 120_000);
    await apps.createNamespacedDeployment({
      namespace: NS,
      body: {
        metadata: { name: 'slipped' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'slipped' } },
          template: {
            metadata: { labels: { app: 'slipped' } },
            spec: {
              serviceAccountName: 'aws',
              terminationGracePeriodSeconds: 1,
              containers: [
                {
                  name: 'app',
                  image: node.images.base,
                  imagePullPolicy: 'Never',
                  command: ['node', '-e', 'setInterval(() => {}, 60000)'],
                },
              ],
            },
          },
        },
      },
    });
    const [first] = await until(
      'the Pod to run without the webhook',
      async () => {
        const pods = await running();
        return pods.length === 1 ? pods : undefined;
      },
      120_000,
    );
    assert.equal(first.spec?.containers[0].env, undefined, 'admitted unchanged');
    const listed = slippedPods(await doctor());
    assert.deepEqual(
      listed.map((c) => c.subject),
      [`Pod ${NS}/${first.metadata!.name}`],
    );
    assert.match(listed[0].message, /failurePolicy Ignore admitted it unchanged; owner Deployment apps\/slipped$/);

    // The webhook back (the upgrade sets the chart's replicas again), then the fix.
    await policy('Fail');
    await until(
      'both webhook replicas Ready',
      async () => (await webhookPods()).filter(ready).length === 2 || undefined,
      180_000,
    );
    const fixed = await doctor('--fix', '--yes');
    assert.deepEqual(
      fixed.filter((c) => c.id === 'restart').map((c) => `${c.verdict} ${c.subject}`),
      ['pass Deployment apps/slipped'],
    );
    const [replacement] = await until(
      'the restarted Pod to run, the old one gone',
      async () => {
        const pods = (await core.listNamespacedPod({ namespace: NS, labelSelector: 'app=slipped' })).items;
        return pods.length === 1 &&
          pods[0].metadata!.name !== first.metadata!.name &&
          pods[0].status?.phase === 'Running'
          ? pods
          : undefined;
      },
      180_000,
    );
    const env = Object.fromEntries((replacement.spec!.containers[0].env ?? []).map((e) => [e.name, e.value]));
    assert.equal(env.AWS_ROLE_ARN, ROLE);
    assert.equal(env.AWS_WEB_IDENTITY_TOKEN_FILE, '/var/run/secrets/eks.amazonaws.com/serviceaccount/token');
    assert.ok(replacement.spec!.volumes?.some((v) => v.name === 'aws-iam-token'));
    assert.deepEqual(slippedPods(await doctor()), []);
  });

  test('with the webhook scaled to 0: scope all refuses an unlabelled Pod; scope labelled creates it and refuses a labelled one', async () => {
    const scaleToZero = async () => {
      await apps.replaceNamespacedDeploymentScale({
        namespace: SYSTEM_NS,
        name: FULLNAME,
        body: { metadata: { name: FULLNAME, namespace: SYSTEM_NS }, spec: { replicas: 0 } },
      });
      await until('no webhook Pod left', async () => ((await webhookPods()).length === 0 ? true : undefined), 120_000);
    };
    await scaleToZero();
    await assert.rejects(
      core.createNamespacedPod({ namespace: NS, body: held('outage-all', 'aws') }),
      /failed calling webhook \W*pods\.workload-identity-webhook\.io\W/,
    );

    await helm(
      ['upgrade', RELEASE, CHART, '--namespace', SYSTEM_NS, '--reuse-values', '--set', 'webhook.scope=labelled'],
      { kubeconfig: node.cp.kubeconfigPath },
    );
    // helm upgrade sets the chart's replica count again.
    await scaleToZero();
    const outside = await core.createNamespacedPod({ namespace: NS, body: held('outage-unlabelled', 'aws') });
    assert.equal(
      outside.spec!.containers[0].env?.find((e) => e.name === 'AWS_ROLE_ARN'),
      undefined,
      'created without reaching the webhook',
    );
    await assert.rejects(
      core.createNamespacedPod({
        namespace: NS,
        body: held('outage-labelled', 'aws', { 'workload-identity-webhook.io/inject': 'true' }),
      }),
      /failed calling webhook \W*pods\.workload-identity-webhook\.io\W/,
    );
  });
});

describe('uninstalling with the documented commands', () => {
  test('the first block leaves exactly the CRD with its policies and the labelled Secrets; the second removes them', async () => {
    const [uninstall, cleanup] = await documentedBlocks('4. Uninstall');
    assert.ok(uninstall && cleanup, 'docs/install.md gives the uninstall and the clean-up as two blocks');
    await runDocumented(
      substitute(uninstall, installPlaceholders({ release: RELEASE, namespace: SYSTEM_NS })),
      node.cp.kubeconfigPath,
    );

    const get = async (path: string) => {
      const res = await node.cp.request('GET', path);
      return { status: res.status, items: res.status === 200 ? (JSON.parse(res.body).items as Manifest[]) : undefined };
    };
    assert.equal((await get(`/api/v1/namespaces/${SYSTEM_NS}`)).status, 404, 'the namespace is gone');
    for (const path of [
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
      '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies',
      '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings',
      '/apis/rbac.authorization.k8s.io/v1/clusterroles',
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      '/apis/rbac.authorization.k8s.io/v1/roles',
      '/apis/rbac.authorization.k8s.io/v1/rolebindings',
    ]) {
      const { items } = await get(`${path}?labelSelector=app.kubernetes.io/instance%3D${RELEASE}`);
      assert.deepEqual(
        items?.map((i) => i.metadata.name),
        [],
        `nothing of the release left in ${path}`,
      );
    }
    // What the docs say remains, and nothing else of ours.
    const crds = (await get('/apis/apiextensions.k8s.io/v1/customresourcedefinitions')).items!.filter((c) =>
      c.metadata.name.endsWith('.workload-identity-webhook.io'),
    );
    assert.deepEqual(
      crds.map((c) => c.metadata.name),
      ['workloadidentitypolicies.workload-identity-webhook.io'],
    );
    const policies = await get('/apis/workload-identity-webhook.io/v1alpha1/workloadidentitypolicies');
    assert.deepEqual(
      policies.items?.map((p) => p.metadata.name),
      ['kept'],
    );
    const labelled = async () =>
      (await get('/api/v1/secrets?labelSelector=workload-identity-webhook.io/provider')).items!.map(
        (s) => `${s.metadata.namespace}/${s.metadata.name}`,
      );
    assert.deepEqual(await labelled(), [`${NS}/aws-credentials`]);

    await runDocumented(cleanup, node.cp.kubeconfigPath);
    assert.equal(
      (await get(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crds[0].metadata.name}`)).status,
      404,
    );
    assert.equal((await get('/apis/workload-identity-webhook.io/v1alpha1/workloadidentitypolicies')).status, 404);
    assert.deepEqual(await labelled(), []);
  });
});

/** The size of a released platform's image as built (its files, uncompressed). */
async function uncompressedSize(arch: string): Promise<number> {
  const image = await mountImage(`localhost/workload-identity-webhook-release:${VERSION}-${arch}`);
  try {
    const { stdout } = await promisify(execFile)('du', ['-sb', '--apparent-size', image.root]);
    return Number(stdout.split('\t')[0]);
  } finally {
    await image.release();
  }
}
