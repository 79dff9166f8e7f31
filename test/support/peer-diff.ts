// The differential harness: each peer webhook (its real binary, or the answers it gave, recorded)
// beside `serve` on one kube-apiserver, with the same ServiceAccounts and serving certificate. Each
// Pod of the corpus (test/fixtures/peer-diff/corpus) goes to both as the same CREATE
// AdmissionReview; both patches are applied, both Pods are created through the API server with
// dryRun, and the stored Pods are compared semantically (peer-diff-compare.ts). A difference is
// either explained by a row of docs/compatibility.md (peer-diff-rows.ts) or unlisted.
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import jsonpatch from 'fast-json-patch';
import { parse, stringify } from 'yaml';
import type { Pod } from '../../src/kube/types.ts';
import { createCa, createServingCert } from '../harness/certs.ts';
import { freePorts, type ControlPlane } from '../harness/control-plane.ts';
import { startProcess, type Managed } from '../harness/processes.ts';
import { httpsRequest } from './https-client.ts';
import { GiveUp, until } from '../harness/until.ts';
import { GCP_PROJECT, TENANT, WIF_PROVIDER, roleArn } from './identities.ts';
import { startWebhook, type WebhookProcess } from './webhook.ts';
import { diffPods, type Difference } from './peer-diff-compare.ts';
import { ROWS, type RowContext } from './peer-diff-rows.ts';
import type { Answer, Cloud, Peer, PeerConfig } from './peer-diff-model.ts';

export type { Answer, Cloud, Peer, PeerConfig };

const ROOT = join(import.meta.dirname, '../..');
export const CORPUS_DIR = join(ROOT, 'test/fixtures/peer-diff/corpus');
export const RECORDINGS_DIR = join(ROOT, 'test/fixtures/peer-diff/recorded');

const CLOUD_OF: Record<Peer, Cloud> = { aws: 'aws', azure: 'azure', pfnet: 'gcp' };

/** The objectSelector of each peer's own webhook configuration: the API server calls it only then. */
const CALLED: Record<Peer, (pod: Pod) => boolean> = {
  aws: (pod) => pod.metadata?.labels?.['eks.amazonaws.com/skip-pod-identity-webhook'] === undefined,
  azure: (pod) => pod.metadata?.labels?.['azure.workload.identity/use'] === 'true',
  pfnet: () => true,
};

export interface CorpusFile {
  file: string;
  origin: Record<string, string>;
  cloud: Cloud;
  namespace: string;
  serviceAccounts: { metadata: { name: string; annotations?: Record<string, string> } }[];
  pods: Pod[];
}

export function loadCorpus(dir = CORPUS_DIR): CorpusFile[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => ({ file: f, ...(parse(readFileSync(join(dir, f), 'utf8')) as Omit<CorpusFile, 'file'>) }));
}

export const CONFIGS: PeerConfig[] = [
  { id: 'aws/defaults', peer: 'aws', peerArgs: [], ourArgs: [] },
  {
    id: 'aws/region+regional-sts',
    peer: 'aws',
    peerArgs: ['--aws-default-region=eu-west-2', '--sts-regional-endpoint=true'],
    ourArgs: ['--aws-default-region', 'eu-west-2', '--aws-sts-regional-endpoints'],
  },
  {
    id: 'azure/public',
    peer: 'azure',
    peerArgs: [],
    peerEnv: { AZURE_TENANT_ID: TENANT },
    ourArgs: ['--azure-tenant-id', TENANT],
  },
  {
    id: 'azure/us-government',
    peer: 'azure',
    peerArgs: [],
    peerEnv: { AZURE_TENANT_ID: TENANT, AZURE_ENVIRONMENT: 'AzureUSGovernmentCloud' },
    ourArgs: ['--azure-tenant-id', TENANT, '--azure-cloud', 'AzureUSGovernmentCloud'],
  },
  { id: 'pfnet/defaults', peer: 'pfnet', peerArgs: [], ourArgs: [] },
  {
    id: 'pfnet/region',
    peer: 'pfnet',
    peerArgs: ['--gcp-default-region=europe-west1'],
    ourArgs: ['--gcp-default-region', 'europe-west1'],
  },
];

interface Endpoint {
  review(body: unknown): Promise<Answer>;
  stop(): Promise<void>;
}

export type PodOutcome =
  | { kind: 'identical' }
  | { kind: 'listed'; rows: string[] }
  | { kind: 'unlisted'; rows: string[]; differences: Difference[] };

export interface ConfigReport {
  config: PeerConfig;
  source: 'binary' | 'recorded';
  pods: { pod: string; outcome: PodOutcome }[];
}

// ------------------------------------------------------------------ the peers' processes

/** The assignments scripts/provide-peers.sh prints (printf %q: backslash escapes undone). */
export function providePeers(args: string[]): Record<string, string> {
  const out = execFileSync('bash', [join(ROOT, 'scripts/provide-peers.sh'), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  }).toString();
  const vars: Record<string, string> = {};
  for (const m of out.matchAll(/^([A-Z_]+)=(.*)$/gm)) vars[m[1]] = m[2].replace(/\\(.)/g, '$1');
  return vars;
}

export function pinnedVersions(): Record<Peer, string> {
  const v = providePeers(['--versions']);
  return { aws: v.AWS_PEER_VERSION, azure: v.AZURE_PEER_VERSION, pfnet: v.PFNET_PEER_VERSION };
}

export interface TlsFiles {
  dir: string;
  certFile: string;
  keyFile: string;
  caPem: string;
}

/** One serving certificate for 127.0.0.1 and `ips`, shared by `serve` and every peer. */
export async function servingCertificate(dir: string, ips: string[] = []): Promise<TlsFiles> {
  const ca = await createCa('peer-diff-ca');
  const serving = await createServingCert(ca, 'webhook', { dns: ['localhost'], ips: ['127.0.0.1', ...ips] });
  mkdirSync(dir, { recursive: true });
  const certFile = join(dir, 'tls.crt');
  const keyFile = join(dir, 'tls.key');
  writeFileSync(certFile, serving.cert);
  writeFileSync(keyFile, serving.key, { mode: 0o600 });
  return { dir, certFile, keyFile, caPem: ca.cert };
}

/**
 * The two controller-runtime peers (Azure, pfnet) listen on port 9443 whatever their flags say:
 * one at a time on this machine, under a lock the process itself holds (bash takes it on fd 9,
 * then execs the peer, which keeps it until it exits).
 */
function locked(lockFile: string, command: string, args: string[]): [string, string[]] {
  return ['bash', ['-c', 'exec 9>"$1"; flock 9; shift; exec "$@"', 'peer-lock', lockFile, command, ...args]];
}

/** Starts one peer as its chart runs it, on loopback (the side-by-side benchmark reuses this). */
export async function startPeer(
  cp: ControlPlane,
  config: PeerConfig,
  binary: string,
  tls: TlsFiles,
  lockDir: string,
): Promise<{ url: string; proc: Managed }> {
  const log = join(cp.dir, `peer-${config.id.replace(/\W/g, '_')}.log`);
  const env = { KUBECONFIG: cp.kubeconfigPath, ...config.peerEnv };
  if (config.peer === 'aws') {
    const [port, metrics] = await freePorts(2);
    const proc = startProcess(
      config.id,
      binary,
      [
        '--in-cluster=false',
        `--kubeconfig=${cp.kubeconfigPath}`,
        `--tls-cert=${tls.certFile}`,
        `--tls-key=${tls.keyFile}`,
        `--port=${port}`,
        `--metrics-port=${metrics}`,
        ...config.peerArgs,
      ],
      log,
      env,
    );
    return { url: `https://127.0.0.1:${port}/mutate`, proc };
  }
  const [health, metrics] = await freePorts(2);
  // controller-runtime reads tls.crt and tls.key from its certificate folder: Azure's flag names
  // it, pfnet's is $TMPDIR/k8s-webhook-server/serving-certs.
  const tmp = join(cp.dir, `peer-tmp-${config.id.replace(/\W/g, '_')}`);
  const certDir = join(tmp, 'k8s-webhook-server', 'serving-certs');
  mkdirSync(certDir, { recursive: true });
  writeFileSync(join(certDir, 'tls.crt'), readFileSync(tls.certFile));
  writeFileSync(join(certDir, 'tls.key'), readFileSync(tls.keyFile), { mode: 0o600 });
  const args =
    config.peer === 'azure'
      ? [
          `--webhook-cert-dir=${certDir}`,
          '--disable-cert-rotation',
          '--tls-min-version=1.2',
          // Its chart's defaults (values.yaml logLevel, metricsBackend): the proxy runs at its level.
          '--log-level=info',
          '--metrics-backend=prometheus',
          `--health-addr=127.0.0.1:${health}`,
          `--metrics-addr=127.0.0.1:${metrics}`,
        ]
      : [`--health-probe-bind-address=127.0.0.1:${health}`, `--metrics-bind-address=127.0.0.1:${metrics}`];
  mkdirSync(lockDir, { recursive: true });
  const [command, lockedArgs] = locked(join(lockDir, 'peer-port-9443.lock'), binary, [...args, ...config.peerArgs]);
  const proc = startProcess(config.id, command, lockedArgs, log, { ...env, TMPDIR: tmp });
  await until(
    `${config.id} to be ready`,
    async () => {
      if (proc.exitStatus() !== null) throw new GiveUp(`${config.id} exited:\n${proc.logTail(20)}`);
      return (await fetch(`http://127.0.0.1:${health}/readyz`)).ok || undefined;
    },
    120_000, // it may wait for another run's peer to release port 9443
  );
  return { url: 'https://127.0.0.1:9443/mutate-v1-pod', proc };
}

async function postReview(url: string, caPem: string, review: unknown): Promise<Answer> {
  const res = await httpsRequest(url, {
    method: 'POST',
    ca: caPem,
    body: JSON.stringify(review),
    headers: { 'content-type': 'application/json' },
  });
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${res.body.slice(0, 500)}`);
  const response = res.json().response;
  const patch = response.patch ? JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8')) : undefined;
  return {
    allowed: response.allowed === true,
    ...(patch ? { patch } : {}),
    ...(response.status?.message ? { message: response.status.message } : {}),
    ...(response.warnings?.length ? { warnings: response.warnings } : {}),
  };
}

function httpEndpoint(url: string, caPem: string, stop: () => Promise<void>): Endpoint {
  return { review: (body) => postReview(url, caPem, body), stop };
}

// ------------------------------------------------------------------ recordings

/** A peer's answers, kept so that `npm test` judges against them where the binary is absent. */
interface Recording {
  peer: Peer;
  version: string;
  /** config id -> pod key -> digest of the review's object -> answer */
  answers: Record<string, Record<string, { input: string; answer: Answer }>>;
}

function recordingFile(peer: Peer): string {
  return join(RECORDINGS_DIR, `${peer}.yaml`);
}

export function loadRecording(peer: Peer): Recording | undefined {
  const file = recordingFile(peer);
  return existsSync(file) ? (parse(readFileSync(file, 'utf8')) as Recording) : undefined;
}

export function saveRecording(recording: Recording): void {
  mkdirSync(RECORDINGS_DIR, { recursive: true });
  const header = `# ${recording.peer} peer ${recording.version}: its answer to each review of the corpus, recorded by\n# "npm run peer-diff -- --record" from its binary. test/e2e/peer-diff.test.ts judges against these.\n`;
  writeFileSync(recordingFile(recording.peer), header + stringify(recording, { lineWidth: 0 }));
}

/** The peers this repository cannot build (the Go module proxy does not serve them): recorded. */
export const RECORDED: readonly Peer[] = ['azure', 'pfnet'];

function checkRecorded(recording: Recording, config: PeerConfig, input: Pod, live: Answer): void {
  const key = `${input.metadata!.namespace ?? ''}/${input.metadata!.name}`;
  const entry = recording.answers[config.id]?.[key];
  // The same Pod, not the same operations: the controller-runtime peers order a patch's
  // operations as Go's map iteration does, differently on every run.
  const result = (a: Answer) => [
    a.allowed,
    a.message,
    a.allowed ? jsonpatch.applyPatch(structuredClone(input), a.patch ?? [], true, false).newDocument : undefined,
  ];
  if (!entry || entry.input !== digestOf(input) || !isDeepStrictEqual(result(entry.answer), result(live)))
    throw new Error(
      `${config.id}: the ${recording.peer} peer's answer for ${key} is not the recorded one${entry && entry.input !== digestOf(input) ? ' (the Pod changed)' : ''}; run "npm run peer-diff -- --record"\n${JSON.stringify(entry?.answer)}\n${JSON.stringify(live)}`,
    );
}

const digestOf = (value: unknown): string => createHash('sha256').update(JSON.stringify(value)).digest('hex');

function recordedEndpoint(recording: Recording, config: PeerConfig): Endpoint {
  const answers = recording.answers[config.id] ?? {};
  return {
    async review(body) {
      const request = (body as { request: { namespace: string; object: Pod } }).request;
      const key = `${request.namespace}/${request.object.metadata!.name}`;
      const entry = answers[key];
      if (!entry) throw new Error(`${config.id}: no recorded answer for ${key}; run "npm run peer-diff -- --record"`);
      if (entry.input !== digestOf(request.object))
        throw new Error(`${config.id}: ${key} changed since it was recorded; run "npm run peer-diff -- --record"`);
      return entry.answer;
    },
    stop: async () => {},
  };
}

// ------------------------------------------------------------------ one run

export interface RunOptions {
  cp: ControlPlane;
  /** The peers' binaries; a peer without one is judged from its recording. */
  binaries: Partial<Record<Peer, string>>;
  versions: Record<Peer, string>;
  /** Record the answers of the peers run from their binaries. */
  record?: boolean;
  configs?: PeerConfig[];
  corpus?: CorpusFile[];
  /** Folder of the lock on port 9443 shared with other runs on this machine. */
  lockDir: string;
}

function review(pod: Pod, namespace: string): unknown {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomUUID(),
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      name: pod.metadata?.name,
      namespace,
      operation: 'CREATE',
      userInfo: { username: 'peer-diff', groups: ['system:authenticated'] },
      object: pod,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  };
}

async function dryRunCreate(cp: ControlPlane, namespace: string, pod: Pod): Promise<Pod | { refused: string }> {
  const res = await cp.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, pod);
  const body = JSON.parse(res.body);
  if (res.status >= 300) return { refused: String(body.message) };
  return body as Pod;
}

/** The Pod as the webhooks see it: decoded and defaulted by the API server, before any webhook. */
async function admittedForm(cp: ControlPlane, namespace: string, pod: Pod): Promise<Pod> {
  const stored = await dryRunCreate(cp, namespace, { apiVersion: 'v1', kind: 'Pod', ...pod } as Pod);
  if ('refused' in stored)
    throw new Error(`the API server refuses corpus Pod ${namespace}/${pod.metadata?.name}: ${stored.refused}`);
  const meta = stored.metadata!;
  delete meta.uid;
  delete meta.creationTimestamp;
  delete (meta as Record<string, unknown>).resourceVersion;
  // Timestamped, so a recorded answer could never match again; no webhook reads them.
  delete (meta as Record<string, unknown>).managedFields;
  delete (stored as Record<string, unknown>).status;
  return stored;
}

async function outcome(
  cp: ControlPlane,
  namespace: string,
  input: Pod,
  ours: Answer,
  theirs: Answer,
  ctx: Omit<RowContext, 'input' | 'ours' | 'theirs'>,
): Promise<PodOutcome> {
  const stored = async (a: Answer): Promise<Pod | { refused: string }> => {
    if (!a.allowed) return { refused: a.message ?? 'denied' };
    const patched = jsonpatch.applyPatch(structuredClone(input), a.patch ?? [], true, false).newDocument;
    return dryRunCreate(cp, namespace, patched);
  };
  let oursPod = await stored(ours);
  let theirsPod = await stored(theirs);
  const full: RowContext = { ...ctx, input, ours, theirs };
  let differences = diffPods(oursPod, theirsPod);
  if (differences.length === 0) return { kind: 'identical' };
  const rows: string[] = [];
  for (const row of ROWS) {
    if (!row.peers.includes(ctx.peer)) continue;
    const next = row.explain(structuredClone(oursPod), structuredClone(theirsPod), full);
    if (!next) continue;
    const after = diffPods(next.ours, next.theirs);
    if (after.length < differences.length) {
      rows.push(row.id);
      [oursPod, theirsPod, differences] = [next.ours, next.theirs, after];
    }
    if (differences.length === 0) return { kind: 'listed', rows };
  }
  return { kind: 'unlisted', rows, differences };
}

/** Waits until a webhook has the ServiceAccounts cached: its answer for the sentinel Pod patches. */
async function synced(endpoint: Endpoint, sentinel: { pod: Pod; namespace: string }, what: string): Promise<void> {
  await until(
    `${what} to see the ServiceAccounts`,
    async () => {
      const a = await endpoint.review(review(sentinel.pod, sentinel.namespace));
      return (a.allowed && (a.patch?.length ?? 0) > 0) || undefined;
    },
    60_000,
  );
}

const SENTINEL_NAMESPACE = 'peer-diff-sentinel';
const SENTINELS: Record<Cloud, { annotations: Record<string, string>; labels?: Record<string, string> }> = {
  aws: { annotations: { 'eks.amazonaws.com/role-arn': roleArn('sentinel') } },
  azure: {
    annotations: { 'azure.workload.identity/client-id': '00000000-0000-4000-8000-00000000ffff' },
    labels: { 'azure.workload.identity/use': 'true' },
  },
  gcp: {
    annotations: {
      'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
      'cloud.google.com/service-account-email': `sentinel@${GCP_PROJECT}.iam.gserviceaccount.com`,
    },
  },
};

/** Namespaces and ServiceAccounts of the corpus, then the sentinels (created last, so seen last). */
export async function createServiceAccounts(cp: ControlPlane, corpus: CorpusFile[]): Promise<void> {
  const ok = async (path: string, body: unknown) => {
    const res = await cp.request('POST', path, body);
    if (res.status >= 300 && res.status !== 409) throw new Error(`POST ${path}: ${res.status} ${res.body}`);
  };
  for (const file of corpus) {
    await ok('/api/v1/namespaces', { metadata: { name: file.namespace } });
    // The ServiceAccount controller's `default` in every namespace (this control plane has none).
    if (!file.serviceAccounts.some((sa) => sa.metadata.name === 'default'))
      await ok(`/api/v1/namespaces/${file.namespace}/serviceaccounts`, { metadata: { name: 'default' } });
    for (const sa of file.serviceAccounts)
      await ok(`/api/v1/namespaces/${file.namespace}/serviceaccounts`, {
        metadata: { name: sa.metadata.name, annotations: sa.metadata.annotations ?? {} },
      });
  }
  await ok('/api/v1/namespaces', { metadata: { name: SENTINEL_NAMESPACE } });
  for (const [cloud, s] of Object.entries(SENTINELS))
    await ok(`/api/v1/namespaces/${SENTINEL_NAMESPACE}/serviceaccounts`, {
      metadata: { name: `sentinel-${cloud}`, annotations: s.annotations },
    });
}

/** The peer of one configuration: its binary, or its recorded answers at the pinned version. */
async function peerEndpoint(options: RunOptions, config: PeerConfig, tls: TlsFiles): Promise<Endpoint> {
  const binary = options.binaries[config.peer];
  if (binary) {
    const peer = await startPeer(options.cp, config, binary, tls, options.lockDir);
    return httpEndpoint(peer.url, tls.caPem, () => peer.proc.stop());
  }
  const recording = loadRecording(config.peer);
  if (!recording) throw new Error(`no ${config.peer} peer binary and no recording in ${recordingFile(config.peer)}`);
  if (recording.version !== options.versions[config.peer])
    throw new Error(
      `the ${config.peer} recording is of ${recording.version}, the pin is ${options.versions[config.peer]}: record again`,
    );
  return recordedEndpoint(recording, config);
}

/** What a run records, and the recordings a live peer is held to. */
interface Books {
  writing: Map<Peer, Recording>;
  holding: Map<Peer, Recording>;
}

function keep(books: Books, options: RunOptions, config: PeerConfig, input: Pod, answer: Answer): void {
  if (!options.binaries[config.peer]) return;
  const held = books.holding.get(config.peer);
  if (held) checkRecorded(held, config, input, answer);
  if (!options.record || !RECORDED.includes(config.peer)) return;
  const rec = books.writing.get(config.peer) ?? {
    peer: config.peer,
    version: options.versions[config.peer],
    answers: {},
  };
  books.writing.set(config.peer, rec);
  (rec.answers[config.id] ??= {})[`${input.metadata!.namespace}/${input.metadata!.name}`] = {
    input: digestOf(input),
    answer,
  };
}

/** One configuration: both webhooks up and synced, every Pod of its cloud through both. */
async function runConfig(
  options: RunOptions,
  config: PeerConfig,
  corpus: CorpusFile[],
  tls: TlsFiles,
  books: Books,
): Promise<ConfigReport> {
  const { cp } = options;
  const cloud = CLOUD_OF[config.peer];
  const theirs = await peerEndpoint(options, config, tls);
  // The peer is running: if serve cannot start, the peer stops too (a child left behind held the run open).
  const wh: WebhookProcess = await startWebhook(cp, config.ourArgs, { tls }).catch(async (err: unknown) => {
    await theirs.stop();
    throw err;
  });
  const ours = httpEndpoint(`${wh.url}/mutate`, tls.caPem, () => wh.stop());
  try {
    const sentinel = {
      namespace: SENTINEL_NAMESPACE,
      pod: {
        metadata: { name: 'sentinel', namespace: SENTINEL_NAMESPACE, labels: SENTINELS[cloud].labels },
        spec: { serviceAccountName: `sentinel-${cloud}`, containers: [{ name: 'c', image: 'busybox' }] },
      } as Pod,
    };
    if (options.binaries[config.peer]) await synced(theirs, sentinel, config.id);
    await synced(ours, sentinel, `serve (${config.id})`);
    const report: ConfigReport = { config, source: options.binaries[config.peer] ? 'binary' : 'recorded', pods: [] };
    for (const file of corpus.filter((f) => f.cloud === cloud)) {
      for (const raw of file.pods) {
        const input = await admittedForm(cp, file.namespace, raw);
        const body = review(input, file.namespace);
        const a = await ours.review(body);
        const b: Answer = CALLED[config.peer](input) ? await theirs.review(body) : { allowed: true };
        keep(books, options, config, input, b);
        const saName = input.spec?.serviceAccountName ?? 'default';
        const sa = file.serviceAccounts.find((s) => s.metadata.name === saName);
        const result = await outcome(cp, file.namespace, input, a, b, {
          peer: config.peer,
          config,
          serviceAccount: sa?.metadata.annotations ?? {},
        });
        report.pods.push({ pod: `${file.file}: ${input.metadata!.name}`, outcome: result });
      }
    }
    return report;
  } finally {
    await Promise.all([ours.stop(), theirs.stop()]);
  }
}

export async function runPeerDiff(options: RunOptions): Promise<ConfigReport[]> {
  const corpus = options.corpus ?? loadCorpus();
  const tls = await servingCertificate(join(options.cp.dir, 'peer-diff-tls'));
  await createServiceAccounts(options.cp, corpus);
  const books: Books = { writing: new Map(), holding: new Map() };
  // A peer run from its binary is also held to its recording, so a stale one cannot pass unseen.
  for (const peer of RECORDED) {
    const rec = options.binaries[peer] && !options.record ? loadRecording(peer) : undefined;
    if (rec?.version === options.versions[peer]) books.holding.set(peer, rec);
  }
  const reports: ConfigReport[] = [];
  for (const config of options.configs ?? CONFIGS) reports.push(await runConfig(options, config, corpus, tls, books));
  for (const rec of books.writing.values()) saveRecording(rec);
  return reports;
}

/** The table: per peer and configuration, identical / listed / unlisted Pods. */
export function formatReport(reports: ConfigReport[]): string {
  const lines = [
    '| peer / configuration | judged against | Pods | identical | only listed rows | unlisted |',
    '|---|---|---|---|---|---|',
  ];
  for (const r of reports) {
    const count = (k: PodOutcome['kind']) => r.pods.filter((p) => p.outcome.kind === k).length;
    lines.push(
      `| ${r.config.id} | ${r.source} | ${r.pods.length} | ${count('identical')} | ${count('listed')} | ${count('unlisted')} |`,
    );
  }
  const rows = new Map<string, Set<string>>();
  for (const r of reports)
    for (const p of r.pods)
      if (p.outcome.kind !== 'identical')
        for (const row of p.outcome.rows) (rows.get(row) ?? rows.set(row, new Set()).get(row)!).add(p.pod);
  lines.push('', 'Rows of docs/compatibility.md met, with a Pod that shows each:');
  for (const [row, pods] of [...rows].sort()) lines.push(`- ${row}: ${pods.size} Pods, e.g. ${[...pods][0]}`);
  const unlisted = reports.flatMap((r) =>
    r.pods.flatMap((p) => (p.outcome.kind === 'unlisted' ? [{ config: r.config.id, ...p }] : [])),
  );
  if (unlisted.length) {
    lines.push('', 'Unlisted differences:');
    for (const u of unlisted) {
      lines.push(`- ${u.config} ${u.pod}:`);
      if (u.outcome.kind === 'unlisted')
        for (const d of u.outcome.differences.slice(0, 12))
          lines.push(`    ${d.path}: ours ${JSON.stringify(d.ours)} / peer ${JSON.stringify(d.theirs)}`);
    }
  }
  return lines.join('\n');
}

export function rowsMet(reports: ConfigReport[]): Set<string> {
  return new Set(reports.flatMap((r) => r.pods.flatMap((p) => (p.outcome.kind === 'identical' ? [] : p.outcome.rows))));
}
