// Hostile values against pfnet's gcloud-setup init container (issue 28, finding 6). A tenant with
// `edit` in its namespace writes shell and kubelet syntax into every annotation that can reach the
// setup script, on ServiceAccounts and on Pods, with and without --strict; kube-apiserver asks the
// webhook (dryRun). For each Pod it admits, the init container is expanded as the kubelet expands
// it ($(NAME) and $$, test/support/kubelet-expansion.ts) and its `sh -c` script runs in an empty
// folder, with only a `gcloud` on PATH that records its argv: each admitted Pod must run exactly
// the two intended gcloud commands, with the values the ServiceAccount names, and nothing else.
// Each refused Pod must be refused by the webhook, naming the annotation.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Container, Pod } from '../../src/kube/types.ts';
import { kubeletLiteral } from '../../src/shell.ts';
import { createNamespace, startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { httpsRequest, type RawResponse, type TlsClient } from '../harness/https.ts';
import { KUBELET_HOSTILE } from '../support/hostile.ts';
import { GCP_EMAIL, GCP_PROJECT, ROLE_ARN, WIF_PROVIDER } from '../support/identities.ts';
import { containerArgv, containerEnv, expand, mappingFor } from '../support/kubelet-expansion.ts';
import { registerWebhook, startWebhook, type WebhookProcess } from '../support/webhook.ts';

const PROVIDER_KEY = 'cloud.google.com/workload-identity-provider';
const EMAIL_KEY = 'cloud.google.com/service-account-email';
const GKE_EMAIL_KEY = 'iam.gke.io/gcp-service-account';
const PROJECT_KEY = 'cloud.google.com/project-id';
const BASE = { [PROVIDER_KEY]: WIF_PROVIDER, [EMAIL_KEY]: GCP_EMAIL };
const CONFIG = '/var/run/secrets/gcloud/config';
const TOKEN = '/var/run/secrets/sts.googleapis.com/serviceaccount/token';
const MODES = { loose: [] as string[], strict: ['--strict'] };

interface Case {
  name: string;
  /** The annotation the hostile value is planted in, which a denial must name. */
  key: string;
  serviceAccount: Record<string, string>;
  pod?: Record<string, string>;
}

/** Every place of every annotation that reaches the script or decides what it runs, with each value. */
function cases(): Case[] {
  const out: Case[] = [];
  KUBELET_HOSTILE.forEach((bad, n) => {
    const sa = (name: string, key: string, annotations: Record<string, string>, base: Record<string, string> = BASE) =>
      out.push({ name: `${name}-${n}`, key, serviceAccount: { ...base, ...annotations } });
    const p = (where: string) => WIF_PROVIDER.replace(where, `${where}${bad}`);
    sa('provider-project', PROVIDER_KEY, { [PROVIDER_KEY]: p('projects/123456789012') });
    sa('provider-pool', PROVIDER_KEY, { [PROVIDER_KEY]: p('workloadIdentityPools/on-prem') });
    sa('provider-name', PROVIDER_KEY, { [PROVIDER_KEY]: p('providers/cluster-a') });
    sa('provider-whole', PROVIDER_KEY, { [PROVIDER_KEY]: bad });
    sa('email-name', EMAIL_KEY, { [EMAIL_KEY]: `reader${bad}@${GCP_PROJECT}.iam.gserviceaccount.com` });
    sa('email-domain', EMAIL_KEY, { [EMAIL_KEY]: `reader@${GCP_PROJECT}${bad}.iam.gserviceaccount.com` });
    sa(
      'gke-email',
      GKE_EMAIL_KEY,
      { [GKE_EMAIL_KEY]: `reader${bad}@${GCP_PROJECT}.iam.gserviceaccount.com` },
      { [PROVIDER_KEY]: WIF_PROVIDER },
    );
    sa('project-id', PROJECT_KEY, { [PROJECT_KEY]: `${GCP_PROJECT}${bad}` });
    for (const key of [
      'cloud.google.com/audience',
      'cloud.google.com/injection-mode',
      'cloud.google.com/gcloud-run-as-user',
      'cloud.google.com/token-expiration',
    ])
      sa(key.split('/')[1], key, { [key]: `${key.endsWith('mode') ? 'gcloud' : '3600'}${bad}` });
    sa('providers', 'cloud.google.com/workload-identity-providers', {
      'cloud.google.com/workload-identity-providers': `extra=${p('providers/cluster-a')}`,
    });
    for (const [key, value] of [
      ['cloud.google.com/skip-containers', `other,${bad}`],
      ['cloud.google.com/token-expiration', `3600${bad}`],
    ])
      out.push({ name: `pod-${key.split('/')[1]}-${n}`, key, serviceAccount: BASE, pod: { [key]: value } });
  });
  return out;
}

/** What gcloud must be called with: the ServiceAccount's values, as written. */
function intended(c: Case): string[][] {
  const a = c.serviceAccount;
  const email = (a[EMAIL_KEY] ?? a[GKE_EMAIL_KEY]).trim();
  const project = a[PROJECT_KEY]?.trim() ?? /@(.*)\.iam\.gserviceaccount\.com$/.exec(email)?.[1] ?? '';
  const env = `CLOUDSDK_CORE_PROJECT=${project}`;
  return [
    [
      'gcloud',
      'iam',
      'workload-identity-pools',
      'create-cred-config',
      a[PROVIDER_KEY].trim(),
      `--service-account=${email}`,
      `--output-file=${CONFIG}/federation.json`,
      `--credential-source-file=${TOKEN}`,
      env,
    ],
    ['gcloud', 'auth', 'login', `--cred-file=${CONFIG}/federation.json`, env],
  ];
}

const dir = mkdtempSync('/tmp/wiw-gcloud-setup-');
const bin = join(dir, 'bin');
mkdirSync(bin);

/**
 * Runs the setup container as the runtime would: command and args expanded by the kubelet, `sh`
 * from the image (dash here, as in google-cloud-cli's Debian), its env the kubelet's, PATH only
 * the recording gcloud. Returns gcloud's calls (each argv, then the project it saw), the files
 * left in the working folder, and the script's exit and stderr.
 */
function runSetup(setup: Container) {
  const env = containerEnv(setup);
  const argv = containerArgv(setup, env);
  assert.deepEqual(argv.slice(0, 2), ['sh', '-c'], 'the setup container runs sh -c');
  const record = join(dir, `record-${Math.random().toString(36).slice(2)}`);
  writeFileSync(record, '');
  writeFileSync(
    join(bin, 'gcloud'),
    `#!/bin/sh\n{ printf '%s\\0' gcloud "$@" "CLOUDSDK_CORE_PROJECT=$CLOUDSDK_CORE_PROJECT"; printf '\\n'; } >>'${record}'\n`,
  );
  chmodSync(join(bin, 'gcloud'), 0o755);
  const work = mkdtempSync(join(dir, 'run-'));
  const r = spawnSync('/bin/sh', argv.slice(1), {
    cwd: work,
    env: { ...Object.fromEntries(env), PATH: bin },
    encoding: 'utf8',
  });
  const calls = readFileSync(record, 'utf8')
    .split('\0\n')
    .filter((line) => line !== '')
    .map((line) => line.split('\0'));
  return { calls, files: readdirSync(work), status: r.status, stderr: r.stderr };
}

let cp: ControlPlane;
let tenant: TlsClient;
const webhooks: WebhookProcess[] = [];

before(async () => {
  cp = await startControlPlane({ name: 'e2e-gcloud-setup' });
  const { cert, key } = await cp.issueClientCert('tenant-a');
  tenant = { server: cp.server, caPem: cp.caPem, clientCertPem: cert, clientKeyPem: key };
  for (const [mode, flags] of Object.entries(MODES)) {
    await createNamespace(cp, mode, { 'e2e.workload-identity-webhook.io/mode': mode });
    // `edit`'s rules: no kube-controller-manager runs here to aggregate them into `edit` itself.
    const binding = {
      metadata: { name: 'tenant-a-edit' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:aggregate-to-edit' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'tenant-a' }],
    };
    const res = await cp.request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${mode}/rolebindings`, binding);
    assert.equal(res.status, 201, res.body);
    const wh = await startWebhook(cp, flags);
    webhooks.push(wh);
    await registerWebhook(
      cp,
      wh,
      `gcloud-setup-${mode}`,
      [{ namespaceSelector: { matchLabels: { 'e2e.workload-identity-webhook.io/mode': mode } } }],
      mode,
    );
  }
});

after(async () => {
  for (const wh of webhooks) await wh.stop();
  await cp?.stop();
});

/** As the tenant: `POST` to the namespace's collection. */
function create(namespace: string, resource: string, body: unknown, dryRun = false): Promise<RawResponse> {
  return httpsRequest(
    tenant,
    'POST',
    `/api/v1/namespaces/${namespace}/${resource}${dryRun ? '?dryRun=All' : ''}`,
    body,
  );
}

/** Runs `work` over `items`, `width` at a time. */
async function pool<T>(items: readonly T[], width: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++]);
  };
  await Promise.all(Array.from({ length: width }, lane));
}

describe("the kubelet's $(NAME) expansion, as ported", () => {
  test('escapes, references, unknown names and incomplete references', () => {
    const m = mappingFor(
      new Map([
        ['A', 'x'],
        ['EMPTY', ''],
        ['REF', '$(A)'],
      ]),
    );
    const cases: [string, string][] = [
      ['$(A)-$(A)', 'x-x'],
      ['$$(A)', '$(A)'],
      ['$$$(A)', '$x'],
      ['$$$$(A)', '$$(A)'],
      ['$A ${A} $? $', '$A ${A} $? $'],
      ['$(MISSING)', '$(MISSING)'],
      ['a$(EMPTY)b', 'ab'],
      ['$(REF)', '$(A)'], // one pass: a value is not expanded again
      ['$(A$(A))', '$(A$(A))'],
      ['$(A', '$(A'],
      ['$($(A)', '$($(A)'], // the name is `$(A`, unknown
      ['$é$😀', '$é$😀'],
      ['\\$(A)', '\\x'],
    ];
    for (const [input, output] of cases) assert.equal(expand(input, m), output, JSON.stringify(input));
  });

  test('kubeletLiteral: whatever the text, the kubelet passes it on as written', () => {
    const m = mappingFor(
      new Map([
        ['A', 'x'],
        ['$', 'y'],
        ['', 'z'],
      ]),
    );
    let seed = 0x2545f491;
    const next = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) / 2 ** 24;
    const alphabet = ['$', '$', '(', ')', 'A', '$(A)', '$$', '\\', '`', '"', "'", ';', '\n', 'é', '😀'];
    const texts = [...KUBELET_HOSTILE, '', '$', '$(', '$()', '$(A)$'];
    for (let n = 0; n < 500; n++) {
      let text = '';
      for (let i = Math.floor(next() * 10); i > 0; i--) text += alphabet[Math.floor(next() * alphabet.length)];
      texts.push(text);
    }
    for (const text of texts) assert.equal(expand(kubeletLiteral(text), m), text, JSON.stringify(text));
  });

  test('env values see the variables defined before them; command and args see all', () => {
    const c: Container = {
      name: 'c',
      command: ['sh', '-c', 'echo $(B) $$(B)'],
      args: ['$(A)'],
      env: [
        { name: 'B', value: '$(A)-b' },
        { name: 'A', value: 'a' },
      ],
    };
    const env = containerEnv(c);
    assert.deepEqual(
      [...env],
      [
        ['B', '$(A)-b'],
        ['A', 'a'],
      ],
    );
    assert.deepEqual(containerArgv(c, env), ['sh', '-c', 'echo $(A)-b $(B)', 'a']);
  });
});

describe('hostile values in every annotation that reaches the gcloud-setup script', () => {
  for (const mode of Object.keys(MODES)) {
    test(`${mode === 'strict' ? 'with' : 'without'} --strict: each Pod is refused naming the annotation, or runs exactly the intended gcloud commands`, async (t) => {
      const all = cases();
      const problems: string[] = [];
      let ran = 0;
      let refused = 0;
      await pool(all, 8, async (c) => {
        const sa = await create(mode, 'serviceaccounts', { metadata: { name: c.name, annotations: c.serviceAccount } });
        assert.equal(sa.status, 201, sa.body);
        const res = await create(
          mode,
          'pods',
          {
            metadata: { name: c.name, annotations: c.pod },
            spec: { serviceAccountName: c.name, containers: [{ name: 'app', image: 'busybox' }] },
          },
          true,
        );
        const what = `${c.name} (${JSON.stringify(c.pod ?? c.serviceAccount)})`;
        if (res.status !== 201) {
          refused++;
          const message = (JSON.parse(res.body) as { message: string }).message;
          if (!/^admission webhook "[^"]+" denied the request: /.test(message) || !message.includes(c.key))
            problems.push(`${what}: refused, but not by the webhook naming ${c.key}: ${message}`);
          return;
        }
        const setup = (JSON.parse(res.body) as Pod).spec?.initContainers?.find((i) => i.name === 'gcloud-setup');
        if (!setup) return void problems.push(`${what}: admitted without the gcloud-setup container`);
        ran++;
        const run = runSetup(setup);
        const expected = intended(c);
        if (run.status !== 0 || run.stderr !== '' || run.files.length > 0)
          problems.push(`${what}: exit ${run.status}, files ${run.files}, stderr ${JSON.stringify(run.stderr)}`);
        else if (JSON.stringify(run.calls) !== JSON.stringify(expected))
          problems.push(`${what}: gcloud got ${JSON.stringify(run.calls)}, not ${JSON.stringify(expected)}`);
      });
      assert.deepEqual(problems, []);
      // Both branches were exercised: values that are fine where they land (container names, quoted
      // words) run, the others are refused.
      assert.ok(ran > 0 && refused > 0, `${ran} ran, ${refused} refused`);
      t.diagnostic(`${all.length} Pods: ${ran} ran the script as intended, ${refused} refused by the webhook`);
    });
  }

  test('a benign ServiceAccount of each dialect key runs the intended commands (the recorder sees a good run)', async () => {
    const c: Case = { name: 'benign', key: '', serviceAccount: { ...BASE, [PROJECT_KEY]: 'other-project' } };
    await create('loose', 'serviceaccounts', { metadata: { name: c.name, annotations: c.serviceAccount } });
    const res = await create(
      'loose',
      'pods',
      {
        metadata: { name: 'benign' },
        spec: { serviceAccountName: c.name, containers: [{ name: 'app', image: 'busybox' }] },
      },
      true,
    );
    assert.equal(res.status, 201, res.body);
    const setup = (JSON.parse(res.body) as Pod).spec!.initContainers!.find((i) => i.name === 'gcloud-setup')!;
    const run = runSetup(setup);
    assert.deepEqual(run, { calls: intended(c), files: [], status: 0, stderr: '' });
  });
});

/** An integer annotation that reaches a Pod field, with the largest value the API server stores there. */
interface IntegerField {
  key: string;
  serviceAccount: Record<string, string>;
  /** On the Pod (else on the ServiceAccount). */
  onPod?: boolean;
  labels?: Record<string, string>;
  podAnnotations?: Record<string, string>;
  max: number;
  /** The field in the stored Pod. */
  read(pod: Pod): unknown;
}

const initContainer = (pod: Pod, name: string) => pod.spec!.initContainers!.find((c) => c.name === name)!;
const expiry = (volume: string) => (pod: Pod) =>
  pod.spec!.volumes!.find((v) => v.name === volume)!.projected!.sources![0].serviceAccountToken!.expirationSeconds;
const AZURE = { 'azure.workload.identity/client-id': '8f3b2c1a-7d4e-4f5a-9b6c-0d1e2f3a4b5c' };
const AZURE_POD = { 'azure.workload.identity/use': 'true' };

const INTEGER_FIELDS: IntegerField[] = [
  {
    key: 'cloud.google.com/gcloud-run-as-user',
    serviceAccount: BASE,
    max: 2 ** 31 - 1,
    read: (pod) => (initContainer(pod, 'gcloud-setup').securityContext as { runAsUser?: number }).runAsUser,
  },
  {
    key: 'cloud.google.com/token-expiration',
    serviceAccount: BASE,
    onPod: true,
    max: 2 ** 32,
    read: expiry('gcp-iam-token'),
  },
  {
    key: 'eks.amazonaws.com/token-expiration',
    serviceAccount: { 'eks.amazonaws.com/role-arn': `${ROLE_ARN}` },
    max: 2 ** 32,
    read: expiry('aws-iam-token'),
  },
  {
    key: 'azure.workload.identity/service-account-token-expiration',
    serviceAccount: AZURE,
    onPod: true,
    labels: AZURE_POD,
    max: 86400,
    read: expiry('azure-identity-token'),
  },
  {
    key: 'azure.workload.identity/proxy-sidecar-port',
    serviceAccount: AZURE,
    onPod: true,
    labels: AZURE_POD,
    podAnnotations: { 'azure.workload.identity/inject-proxy-sidecar': 'true' },
    max: 65535,
    read: (pod) => (initContainer(pod, 'azwi-proxy').ports as { containerPort: number }[])[0].containerPort,
  },
];

describe('integer annotations that reach a Pod field are held to the range kube-apiserver stores', () => {
  let n = 0;
  for (const f of INTEGER_FIELDS) {
    test(`${f.key}: ${f.max} is stored; ${f.max + 1} is refused by the webhook, naming the annotation and the bound`, async () => {
      for (const value of [f.max, f.max + 1]) {
        const name = `integer-${n++}`;
        const own = { [f.key]: String(value) };
        const sa = await create('loose', 'serviceaccounts', {
          metadata: { name, annotations: { ...f.serviceAccount, ...(f.onPod ? {} : own) } },
        });
        assert.equal(sa.status, 201, sa.body);
        const res = await create(
          'loose',
          'pods',
          {
            metadata: { name, labels: f.labels, annotations: { ...f.podAnnotations, ...(f.onPod ? own : {}) } },
            spec: { serviceAccountName: name, containers: [{ name: 'app', image: 'busybox' }] },
          },
          true,
        );
        if (value === f.max) {
          assert.equal(res.status, 201, res.body);
          assert.equal(f.read(JSON.parse(res.body) as Pod), value);
          continue;
        }
        assert.equal(res.status, 400, res.body);
        const { message } = JSON.parse(res.body) as { message: string };
        assert.match(message, /^admission webhook "[^"]+" denied the request: /);
        assert.ok(message.includes(f.key) && message.includes(String(f.max)), message);
      }
    });
  }
});
