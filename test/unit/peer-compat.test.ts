// Replays the peers' own handler test cases (test/fixtures/peers/<peer>/<case>.yaml) through the
// pure mutation core, as `preview` does, and compares our Pod with the peer's expected Pod. The
// only differences removed are the ones a fixture names, and each name must be a row of the table
// in docs/compatibility.md: an unlisted difference fails.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { mutatePod } from '../../src/mutate/pod.ts';
import { INJECTED_ANNOTATION } from '../../src/mutate/injection-record.ts';
import { GCP_MOUNT_PATH, GCP_TOKEN_FILE } from '../../src/clouds/gcp/conventions.ts';
import { externalAccountConfig, parseWorkloadIdentityProvider } from '../../src/clouds/gcp/external-account.ts';
import { gcloudSetupContainer, PFNET_SETUP_SCRIPT } from '../../src/clouds/gcp/gcloud-setup.ts';
import type { Container, Pod, ServiceAccountView } from '../../src/kube/types.ts';
import { parseAdmissionReview } from '../../src/admission/review.ts';
import { apply, config, providers } from '../support/builders.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const FIXTURES = join(ROOT, 'test/fixtures/peers');

interface Fixture {
  peer: string;
  source: string;
  case: string;
  /** Our flags that give the peer's settings. */
  flags: Record<string, string>;
  /** The peer's settings we have no flag for; a difference must explain each. */
  peerFlags?: Record<string, string>;
  serviceAccount?: { metadata: { name: string; namespace: string; annotations?: Record<string, string> } };
  pod: Pod;
  /** The peer's Pod after its mutation; absent when the peer refused the Pod. */
  expected?: Pod;
  /** Rows of docs/compatibility.md that apply to this case. */
  differences: string[];
  /** Our admission warnings, exactly (the peer has none to compare with). */
  warnings?: string[];
  /** Where the peer refuses the Pod: our denial's reason. */
  reason?: string;
  /** How a case that tests a peer's helper shows in a whole Pod. */
  note?: string;
}

type Outcome = { pod: Pod; denied?: string; warnings: string[]; removes: number };

/**
 * `gcp-setup-script-env`: the peer's setup command is pfnet's script, byte for byte, and ours is
 * that script with each $(NAME) read from the environment as "$NAME" ($ doubled for the kubelet),
 * nothing else changed. Ours then takes the peer's command.
 */
function sameSetupScript(ours: Container, theirs: Container): void {
  assert.deepEqual(theirs.command, ['sh', '-c', PFNET_SETUP_SCRIPT], "the peer's script");
  const quoted = PFNET_SETUP_SCRIPT.replace(/\$\((\w+)\)/g, (_m, name: string) => `"$$${name}"`);
  assert.deepEqual(ours.command, ['sh', '-c', quoted], 'the same script, its values read from the environment');
  ours.command = theirs.command;
}

/**
 * One function per row of docs/compatibility.md: it removes that difference from both Pods.
 * `denied-*` rows stand for cases where we refuse what the peer admitted (or the reverse); the
 * test then checks our denial's reason instead of the Pod.
 */
const normalizers: Record<string, (ours: Pod, peers: Pod, fixture: Fixture) => void> = {
  'injection-record': (ours) => {
    const ann = ours.metadata?.annotations;
    if (!ann) return;
    delete ann[INJECTED_ANNOTATION];
    if (Object.keys(ann).length === 0) delete ours.metadata!.annotations;
  },
  'go-zero-values': (_ours, peers) => {
    // Go writes an empty struct as `{}` and a nil pointer as `null` where a field lacks omitempty
    // (resources, grpc.service); the API server stores the same Pod either way.
    for (const c of [...(peers.spec?.containers ?? []), ...(peers.spec?.initContainers ?? [])]) {
      if (c.resources && Object.keys(c.resources).length === 0) delete c.resources;
      dropNulls(c);
    }
  },
  'api-server-defaults': (ours, peers) => {
    // The peer's test reads its Pod back from envtest's API server, which defaults these.
    const ourNames = new Map(
      [...(ours.spec?.containers ?? []), ...(ours.spec?.initContainers ?? [])].map((c) => [c.name, c]),
    );
    for (const c of [...(peers.spec?.containers ?? []), ...(peers.spec?.initContainers ?? [])]) {
      for (const k of ['terminationMessagePath', 'terminationMessagePolicy', 'imagePullPolicy'])
        if (ourNames.get(c.name)?.[k] === undefined) delete c[k];
    }
  },
  'gcp-google-cloud-project': (ours) => {
    for (const c of [...(ours.spec?.containers ?? []), ...(ours.spec?.initContainers ?? [])]) {
      c.env = c.env?.filter((e) => e.name !== 'GOOGLE_CLOUD_PROJECT');
    }
  },
  'gcp-setup-script-env': (ours, peers) => {
    const setup = (p: Pod) => p.spec!.initContainers!.find((c) => c.name === 'gcloud-setup')!;
    sameSetupScript(setup(ours), setup(peers));
  },
  'gcp-credentials-file-form': (ours, peers) => {
    // Same file for the SDKs: our gcloud-written form adds universe_domain and orders keys as gcloud does.
    const key = 'cloud.google.com/external-credentials-json';
    const mine = JSON.parse(ours.metadata!.annotations![key]);
    delete mine.universe_domain;
    assert.deepEqual(mine, JSON.parse(peers.metadata!.annotations![key]), 'the credential files differ beyond form');
    ours.metadata!.annotations![key] = peers.metadata!.annotations![key];
  },
  'azure-token-both-layouts': (ours, peers) => {
    // Our one token volume is mounted where the peer's 0.8-1.5 and 1.6+ releases put the file; seen
    // from the 1.6 mount it is the peer's volume. Nothing else may differ.
    const theirs = peers.spec!.volumes!.find((v) => v.name.startsWith('azure-workload-identity-reserved-'))!;
    const mine = ours.spec!.volumes!.find((v) => v.name === 'azure-identity-token')!;
    assert.equal(mine.projected!.sources![0].serviceAccountToken!.path, 'azure-identity-token');
    mine.name = theirs.name;
    mine.projected!.sources![0].serviceAccountToken!.path = 'token/azure-identity-token';
    for (const c of [...(ours.spec?.containers ?? []), ...(ours.spec?.initContainers ?? [])]) {
      const mounts = (c.volumeMounts ?? []).filter((m) => m.name === 'azure-identity-token');
      if (mounts.length === 0) continue;
      assert.deepEqual(
        mounts.map((m) => m.mountPath),
        ['/var/run/secrets/azure/tokens', '/var/run/secrets/azure/wi/token'],
        `container ${c.name} has the token at both paths`,
      );
      c.volumeMounts = c.volumeMounts!.filter((m) => m.mountPath !== '/var/run/secrets/azure/tokens');
      for (const m of c.volumeMounts)
        if (m.name === 'azure-identity-token')
          Object.assign(m, { name: theirs.name, mountPath: '/var/run/secrets/azure/wi' });
      for (const e of c.env ?? [])
        if (e.name === 'AZURE_FEDERATED_TOKEN_FILE' && e.value === '/var/run/secrets/azure/tokens/azure-identity-token')
          e.value = '/var/run/secrets/azure/wi/token/azure-identity-token';
    }
  },
  'azure-reserved-volume-kept': (ours, peers) => {
    // The Pod's own volume under the peer's name, mounted by nobody: the peer overwrote it with its
    // token volume (same place in the list); we left it as written and appended ours.
    const prefix = 'azure-workload-identity-reserved-';
    const at = ours.spec!.volumes!.findIndex((v) => v.name.startsWith(prefix));
    assert.ok(at >= 0 && peers.spec!.volumes![at].name === ours.spec!.volumes![at].name);
    const mine = ours.spec!.volumes!.findIndex((v) => v.name === 'azure-identity-token');
    ours.spec!.volumes![at] = ours.spec!.volumes![mine];
    ours.spec!.volumes!.splice(mine, 1);
  },
  'aws-pod-identity-expiry-jitter': (ours, peers, fixture) => {
    // The peer draws the default expiry from [79200, 86400]; ours is the default itself.
    const name = fixture.flags['aws-container-credentials-token-volume-name'] ?? 'eks-pod-identity-token';
    const token = (p: Pod) =>
      p.spec!.volumes!.find((v) => v.name === name)!.projected!.sources![0].serviceAccountToken!;
    const theirs = token(peers);
    assert.ok(theirs.expirationSeconds! >= 79200 && theirs.expirationSeconds! <= 86400, 'outside the jitter range');
    assert.equal(token(ours).expirationSeconds, 86400);
    theirs.expirationSeconds = 86400;
  },
  'additive-volume-order': (ours, peers) => {
    // Our patch only appends; where the peer inserts the same volume first, compare volumes by name.
    for (const p of [ours, peers]) p.spec?.volumes?.sort((a, b) => a.name.localeCompare(b.name));
  },
};

/**
 * Rows where the outcome itself differs (a mode of the peer this webhook does not have, an input
 * the API server never sends): the case then checks that difference, exactly.
 */
const outcomes: Record<string, (ours: Pod, peers: Pod, fixture: Fixture) => void> = {
  'azure-opt-in-label': (ours, peers, fixture) => {
    assert.notEqual(fixture.pod.metadata?.labels?.['azure.workload.identity/use'], 'true');
    assert.ok(peers.spec?.volumes?.length, "the peer's Handle mutates the unlabelled Pod");
    assert.equal(ours.spec?.volumes, undefined, 'we leave an unlabelled Pod alone');
  },
  'serviceaccount-missing': (ours, peers, fixture) => {
    assert.equal(peers, undefined, 'the peer refuses the Pod');
    assert.equal(fixture.serviceAccount, undefined);
    // We admit it (the API server's ServiceAccount admission refuses it next, naming the account).
    assert.ok(ours.spec?.volumes?.some((v) => v.name === 'azure-identity-token'));
  },
  'empty-serviceaccount-name': (ours, peers, fixture) => {
    assert.deepEqual(peers.spec?.volumes, undefined, 'the peer leaves the Pod alone');
    assert.equal(fixture.pod.spec?.serviceAccountName, '');
    // We read the namespace's default ServiceAccount, which the API server names before any webhook runs.
    assert.ok(ours.spec?.volumes?.some((v) => v.name === 'gcp-iam-token'));
  },
};

function dropNulls(value: unknown): void {
  if (typeof value !== 'object' || value === null) return;
  for (const [k, v] of Object.entries(value)) {
    if (v === null) delete (value as Record<string, unknown>)[k];
    else dropNulls(v);
  }
}

function loadFixtures(): [string, Fixture][] {
  const out: [string, Fixture][] = [];
  for (const peer of readdirSync(FIXTURES).sort()) {
    for (const file of readdirSync(join(FIXTURES, peer)).sort()) {
      if (file.endsWith('.yaml'))
        out.push([`${peer}/${file}`, parse(readFileSync(join(FIXTURES, peer, file), 'utf8')) as Fixture]);
    }
  }
  return out;
}

/** The ids of the table's rows: the first cell, in backticks. */
function documentedDifferences(): Set<string> {
  const text = readFileSync(join(ROOT, 'docs/compatibility.md'), 'utf8');
  // The peers' rows; the policy mode's section has its own (test/e2e/policy-mode.test.ts).
  const peers = text.slice(0, text.indexOf('## The policy mode'));
  return new Set([...peers.matchAll(/^\| `([a-z0-9.-]+)` \|/gm)].map((m) => m[1]));
}

function run(fixture: Fixture): Outcome {
  const meta = fixture.serviceAccount?.metadata;
  const sa: ServiceAccountView | undefined = meta && {
    namespace: meta.namespace,
    name: meta.name,
    uid: 'uid-1',
    annotations: meta.annotations ?? {},
  };
  const pod = structuredClone(fixture.pod);
  const namespace = pod.metadata?.namespace ?? 'default';
  // File flags name files of this repository, relative to its root.
  const flags = Object.fromEntries(
    Object.entries(fixture.flags).map(([k, v]) => [
      k,
      k.endsWith('-config') && v.startsWith('test/') ? join(ROOT, v) : v,
    ]),
  );
  const result = mutatePod(providers(flags), { pod, namespace, serviceAccount: sa });
  if (!result.allowed) return { pod, denied: result.denial.reason, warnings: [], removes: 0 };
  const removes = result.patch.filter((op) => op.op === 'remove').length;
  return { pod: apply(pod, result.patch), warnings: result.warnings, removes };
}

const fixtures = loadFixtures();
const documented = documentedDifferences();

describe("the peers' own test cases give the same Pod", () => {
  test('there are fixtures for each peer, and every difference a fixture names is a row of docs/compatibility.md', () => {
    const peers = new Set(fixtures.map(([, f]) => f.peer));
    assert.ok(peers.has('aws/amazon-eks-pod-identity-webhook'));
    assert.ok(peers.has('pfnet-research/gcp-workload-identity-federation-webhook'));
    assert.ok(peers.has('Azure/azure-workload-identity'));
    for (const [name, f] of fixtures) {
      for (const d of f.differences) {
        assert.ok(documented.has(d), `${name}: difference "${d}" is not in docs/compatibility.md`);
        assert.ok(
          d in normalizers || d in outcomes || d.startsWith('denied-'),
          `${name}: difference "${d}" has no check in this test`,
        );
      }
      if (f.peerFlags)
        assert.ok(f.differences.length > 0, `${name}: peer settings without a flag here need a listed difference`);
    }
  });

  test('every row of docs/compatibility.md is used by a fixture or says why none can show it', () => {
    const used = new Set([
      ...fixtures.flatMap(([, f]) => f.differences),
      ...loadHelperFixtures().flatMap(([, f]) => f.cases.flatMap((c) => c.differences)),
    ]);
    const text = readFileSync(join(ROOT, 'docs/compatibility.md'), 'utf8');
    for (const id of documented) {
      const row = text.split('\n').find((l) => l.startsWith(`| \`${id}\` |`))!;
      assert.ok(used.has(id) || row.includes('(no fixture:'), `docs/compatibility.md row ${id} is used by no fixture`);
    }
  });

  // Both webhooks installed during a migration: the peer's Pod reaches us already mutated.
  for (const [name, fixture] of fixtures) {
    if (!fixture.expected || fixture.differences.some((d) => d in outcomes || d.startsWith('denied-'))) continue;
    test(`side by side, ${name}: the Pod the peer mutated gets no second identity from us`, () => {
      const ours = run({ ...fixture, pod: fixture.expected! });
      assert.equal(ours.denied, undefined, `we refused the peer's Pod: ${ours.denied}`);
      const added = structuredClone(ours.pod);
      const peers = structuredClone(fixture.expected!);
      // Our record, and the additions the table lists (same values, other names or form).
      for (const d of ['injection-record', 'gcp-google-cloud-project', 'gcp-credentials-file-form']) {
        if (d === 'injection-record' || fixture.differences.includes(d)) normalizers[d](added, peers, fixture);
      }
      for (const key of Object.keys(added.metadata?.annotations ?? {})) {
        assert.equal(
          added.metadata!.annotations![key],
          peers.metadata?.annotations?.[key] ?? added.metadata!.annotations![key],
        );
      }
      assert.deepEqual(added.spec, peers.spec, 'no volume, mount, env var or container added');
    });
  }

  for (const [name, fixture] of fixtures) {
    test(`${name}: ${fixture.case}`, () => {
      const ours = run(fixture);
      const outcome = fixture.differences.find((d) => d in outcomes);
      const denial = fixture.differences.find((d) => d.startsWith('denied-'));
      const peerDenied = fixture.expected === undefined;
      if (!outcome && (denial || peerDenied)) {
        assert.ok(ours.denied, `expected a denial (${denial ?? 'the peer refuses this Pod'}), got an admitted Pod`);
        if (fixture.reason) assert.equal(ours.denied, fixture.reason);
        return;
      }
      assert.equal(ours.denied, undefined, `we refused a Pod the peer admits: ${ours.denied}`);
      // A Pod the webhook never saw: the patch only adds (the peer's TestHandle checks the same).
      assert.equal(ours.removes, 0, 'no remove operation');
      if (outcome) {
        outcomes[outcome](ours.pod, fixture.expected!, fixture);
        return;
      }
      const peers = structuredClone(fixture.expected!);
      for (const d of fixture.differences) normalizers[d]?.(ours.pod, peers, fixture);
      assert.deepEqual(ours.pod, peers);
      assert.deepEqual(ours.warnings, fixture.warnings ?? []);
    });
  }
});

// The Azure peer's cases that are not about a Pod: its envelope and its start-up.
describe("the Azure peer's cases at the admission envelope and at start-up", () => {
  const review = (object: unknown) => ({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'u1',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      namespace: 'ns1',
      operation: 'CREATE',
      object,
    },
  });

  test('TestHandleError/failed to decode pod: an object that is not a Pod is refused at the envelope, with its code', () => {
    assert.throws(
      () => parseAdmissionReview(review('invalid')),
      (err: Error & { code?: string }) =>
        err.code === 'WIW_BAD_ADMISSION_REVIEW' && err.message === 'request.object must be an object',
    );
  });

  test('TestGetAzureAuthorityHost/invalid cloud name: a start-up error naming the flag and the valid names', () => {
    assert.throws(
      () => config({ 'azure-cloud': 'InvalidCloud' }),
      (err: Error & { code?: string }) =>
        err.code === 'WIW_INVALID_CONFIG' &&
        err.message.startsWith('--azure-cloud="InvalidCloud" must be one of: AzurePublicCloud,') &&
        err.message.includes('AzureStackCloud'),
    );
  });

  const stackFile = (content: string) => {
    const file = join(mkdtempSync(join(tmpdir(), 'wiw-azure-stack-')), 'azurestackcloud.json');
    writeFileSync(file, content);
    return file;
  };
  const labelled: Pod = {
    metadata: { name: 'p', namespace: 'ns1', labels: { 'azure.workload.identity/use': 'true' } },
    spec: { serviceAccountName: 'sa', containers: [{ name: 'c' }] },
  };
  const sa: ServiceAccountView = {
    namespace: 'ns1',
    name: 'sa',
    uid: 'u',
    annotations: { 'azure.workload.identity/client-id': '00000000-0000-0000-0000-000000000001' },
  };

  test("AzureStackCloud: the environment file's activeDirectoryEndpoint (key in any case, as Go reads it) becomes AZURE_AUTHORITY_HOST", () => {
    // The form go-autorest's EnvironmentFromFile reads (an Azure Stack Hub's azurestackcloud.json).
    const file = stackFile(
      JSON.stringify({
        name: 'AzureStackCloud',
        ActiveDirectoryEndpoint: 'https://adfs.local.azurestack.external/adfs/',
        resourceManagerEndpoint: 'https://management.local.azurestack.external/',
      }),
    );
    const flags = {
      'azure-cloud': 'azurestackcloud',
      'azure-environment-filepath': file,
      'azure-tenant-id': 'contoso.example.com',
    };
    const result = mutatePod(providers(flags), {
      pod: structuredClone(labelled),
      namespace: 'ns1',
      serviceAccount: sa,
    });
    assert.ok(result.allowed);
    const env = apply(structuredClone(labelled), result.patch).spec!.containers![0].env!;
    assert.deepEqual(
      env.find((e) => e.name === 'AZURE_AUTHORITY_HOST'),
      {
        name: 'AZURE_AUTHORITY_HOST',
        value: 'https://adfs.local.azurestack.external/adfs/',
      },
    );
  });

  for (const [what, content, message] of [
    ['a file that does not exist', undefined, /cannot read the Azure environment file: ENOENT/],
    ['a file that is not JSON', '{name: AzureStackCloud', /the Azure environment file is not JSON/],
    [
      'a file without activeDirectoryEndpoint',
      '{"name":"AzureStackCloud"}',
      /"activeDirectoryEndpoint" is missing; expected the https URL/,
    ],
    [
      'an endpoint that is not https',
      '{"activeDirectoryEndpoint":"http://adfs.local/adfs/"}',
      /"activeDirectoryEndpoint" is "http:\/\/adfs.local\/adfs\/"; expected the https URL/,
    ],
  ] as const) {
    test(`AzureStackCloud with ${what}: a start-up error naming the file`, () => {
      const file =
        content === undefined ? join(tmpdir(), 'wiw-no-such-dir', 'azurestackcloud.json') : stackFile(content);
      assert.throws(
        () => config({ 'azure-cloud': 'AzureStackCloud', 'azure-environment-filepath': file }),
        (err: Error & { code?: string }) =>
          err.code === 'WIW_INVALID_CONFIG' &&
          err.message.startsWith(`--azure-environment-filepath="${file}": `) &&
          message.test(err.message),
      );
    });
  }

  test('AzureStackCloud without its file, or the file without AzureStackCloud: a start-up error saying what goes with what', () => {
    assert.throws(
      () => config({ 'azure-cloud': 'AzureStackCloud' }),
      /AzureStackCloud needs --azure-environment-filepath/,
    );
    assert.throws(
      () => config({ 'azure-environment-filepath': stackFile('{}') }),
      /--azure-environment-filepath is read only with --azure-cloud=AzureStackCloud \(now AzurePublicCloud\)/,
    );
  });
});

/** Tables of the peers' helper tests: test/fixtures/peers/<peer>/helpers/*.yaml. */
function loadHelperFixtures(peer = 'pfnet'): (readonly [string, HelperFixture])[] {
  const dir = join(FIXTURES, peer, 'helpers');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => [f, parse(readFileSync(join(dir, f), 'utf8')) as HelperFixture] as const);
}

interface HelperCase {
  case: string;
  input?: Record<string, unknown>;
  annotations?: Record<string, string>;
  /** The peer's result; null: nothing to inject. */
  expected?: unknown;
  /** The peer refuses, with an error containing this. */
  error?: string;
  differences: string[];
}
interface HelperFixture {
  peer: string;
  source: string;
  function: string;
  peerDefaults?: Record<string, unknown>;
  cases: HelperCase[];
}

/** Our function for each of pfnet's helpers, giving a value in the peer's shape or a denial. */
const pfnetHelpers: Record<string, (c: HelperCase, f: HelperFixture) => unknown> = {
  NewGCPWorkloadIdentityConfig: (c, f) => {
    const gcp = providers().find((p) => p.name === 'gcp')!;
    const pod: Pod = {
      metadata: { name: 'p', namespace: 'default' },
      spec: { serviceAccountName: 'app', containers: [] },
    };
    const result = gcp.resolvePod({
      pod,
      namespace: 'default',
      serviceAccount: { namespace: 'default', name: 'app', uid: 'uid-1', annotations: c.annotations ?? {} },
      windows: false,
    });
    if (result === undefined) return null;
    if ('reason' in result) return result;
    // The peer's unset fields are its defaults, which its mutatePod applies afterwards.
    const token = result.volume.projected!.sources![0].serviceAccountToken!;
    const expected = c.expected as Record<string, unknown> | null;
    const orDefault = (k: string, ours: unknown) =>
      expected?.[k] === null || expected?.[k] === '' ? (ours === f.peerDefaults![k] ? expected[k] : ours) : ours;
    return {
      workloadIdentityProvider: result.identity.workloadIdentityProvider,
      serviceAccountEmail: result.identity.serviceAccountEmail ?? null,
      audience: orDefault('audience', token.audience),
      tokenExpirationSeconds: orDefault('tokenExpirationSeconds', token.expirationSeconds),
      injectionMode: orDefault('injectionMode', result.initContainer ? 'gcloud' : 'direct'),
    };
  },
  gcloudSetupContainer: (c) => {
    const i = c.input!;
    return gcloudSetupContainer(
      i.workloadIdProvider as string,
      i.saEmail as string,
      i.project as string,
      i.gcloudImage as string,
      (i.runAsUser as number | null) ?? undefined,
      (i.resources as Record<string, unknown> | null) ?? undefined,
    );
  },
  'ExternalAccountCredentials.Render(true)': (c) => {
    const provider = parseWorkloadIdentityProvider(c.input!.audience as string, 'audience');
    assert.ok(!('reason' in provider));
    return JSON.stringify(
      externalAccountConfig({
        provider,
        serviceAccountEmail: c.input!.gsaEmail as string,
        tokenFile: `${GCP_MOUNT_PATH}/${GCP_TOKEN_FILE}`,
      }),
      null,
      2,
    );
  },
};

/** Helper-level rows of docs/compatibility.md: each checks its difference exactly, then removes it. */
const helperDifferences: Record<string, (ours: unknown, c: HelperCase) => unknown> = {
  'gcp-setup-script-env': (ours, c) => {
    sameSetupScript(ours as Container, c.expected as Container);
    return ours;
  },
  'gcp-credentials-file-form': (ours, c) => {
    const mine = JSON.parse(ours as string);
    assert.equal(mine.universe_domain, 'googleapis.com');
    assert.equal(Object.keys(mine)[0], 'universe_domain', "gcloud's key order");
    delete mine.universe_domain;
    const theirs = JSON.parse(c.expected as string);
    assert.deepEqual(mine, theirs, 'the credential files differ beyond form');
    return c.expected;
  },
  'gcp-incomplete-pfnet-annotations': (ours, c) => {
    // pfnet refuses the ServiceAccount's Pods; a provider alone gets direct resource access here,
    // an email alone (no pool to federate with) nothing.
    const a = c.annotations ?? {};
    if (a['cloud.google.com/workload-identity-provider'] !== undefined) {
      const o = ours as Record<string, unknown>;
      assert.equal(o.serviceAccountEmail, null);
      assert.equal(o.injectionMode, 'direct');
    } else {
      assert.equal(ours, null);
    }
    return { error: c.error };
  },
};

describe("pfnet's helper tests give the same values", () => {
  const helperFixtures = loadHelperFixtures();

  test('each helper fixture names our function, and each difference is a row of docs/compatibility.md', () => {
    assert.deepEqual(helperFixtures.map(([, f]) => f.function).sort(), [
      'ExternalAccountCredentials.Render(true)',
      'NewGCPWorkloadIdentityConfig',
      'gcloudSetupContainer',
    ]);
    for (const [, f] of helperFixtures)
      for (const c of f.cases)
        for (const d of c.differences) {
          assert.ok(documented.has(d), `${c.case}: difference "${d}" is not in docs/compatibility.md`);
          assert.ok(d in helperDifferences, `${c.case}: difference "${d}" has no check in this test`);
        }
  });

  for (const [file, fixture] of helperFixtures) {
    for (const c of fixture.cases) {
      test(`pfnet/helpers/${file}: ${c.case}`, () => {
        let ours = pfnetHelpers[fixture.function](c, fixture);
        for (const d of c.differences) ours = helperDifferences[d](ours, c);
        if (c.error !== undefined) {
          if (c.differences.length) return assert.deepEqual(ours, { error: c.error });
          assert.ok(ours && typeof ours === 'object' && 'reason' in ours, `the peer refuses (${c.error}); we did not`);
          return;
        }
        assert.ok(!(ours && typeof ours === 'object' && 'reason' in ours), `we refused: ${JSON.stringify(ours)}`);
        assert.deepEqual(ours, c.expected);
      });
    }
  }
});
