// Re-creates aws/amazon-eks-pod-identity-webhook's golden files (pkg/handler/testdata) as
// fixtures of test/unit/peer-compat.test.ts. The peer's harness reads its settings from `testing.*`
// Pod annotations (handler_pod_test.go: buildModifierFromPod, buildFakeCacheFromPod); they
// become the fixture's flags and ServiceAccount, and the Pod keeps only the user's annotations.
// The expected Pod is the input with the peer's expectedPatch applied.
//
//   node scripts/peer-fixtures/aws.ts <bare repo of the peer> test/fixtures/peers/aws
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import fastJsonPatch from 'fast-json-patch';
import { parse, stringify } from 'yaml';

const [repo, outDir] = process.argv.slice(2);
if (!repo || !outDir) throw new Error('usage: aws.ts <peer git dir> <output dir>');
const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8' });
const commit = git('rev-parse', 'HEAD').trim();
const T = 'testing.eks.amazonaws.com/';

/** Rows of docs/compatibility.md per case, where more than our record and Go's zero values differ. */
const DIFFERENCES: Record<string, string[]> = {
  rawPodWithVolumes: ['injection-record', 'go-zero-values', 'additive-volume-order'],
  rawPodHasVolumeMount: ['denied-invalid-input'],
};
// EKS Pod Identity: the peer jitters the default expiry (its test's random source gives 79200).
const jitter = ['injection-record', 'go-zero-values', 'aws-pod-identity-expiry-jitter'];
Object.assign(DIFFERENCES, {
  'containercredentials-rawPodSkip': jitter,
  'containercredentials-rawPodWithoutVolumes': jitter,
  'containercredentials-rawPodWithVolume': [...jitter, 'additive-volume-order'],
  'containercredentials-rawPodWithConflictingVolumeMount': ['denied-foreign-token-volume'],
});
// The peer's FakeConfig associates default/default; our flag names a file of that association.
const ASSOCIATIONS = 'pod-identity-associations.json';
const CONTAINER_CREDENTIALS_FLAGS: Record<string, string> = {
  uri: 'aws-container-credentials-full-uri',
  audience: 'aws-container-credentials-audience',
  mountPath: 'aws-container-credentials-token-mount-path',
  volumeName: 'aws-container-credentials-token-volume-name',
  tokenPath: 'aws-container-credentials-token-path',
};
/** Our admission warnings per case. */
const shadowed = (container: string, variable: string) =>
  `container "${container}" sets ${variable} itself, so it does not use the aws identity the webhook injects; remove ${variable} from the container to use workload identity (docs/install.md#keeping-an-old-credential)`;
const WARNINGS: Record<string, string[]> = {
  // A container's own AWS_ROLE_ARN wins, in the peer as here; we say so.
  rawPodSkip: [shadowed('balajilovesoreos', 'AWS_ROLE_ARN')],
};

mkdirSync(outDir, { recursive: true });
writeFileSync(
  join(outDir, ASSOCIATIONS),
  `${JSON.stringify({ identities: [{ namespace: 'default', serviceAccount: 'default' }] }, null, 2)}\n`,
);
for (const path of git('ls-tree', '-r', '--name-only', 'HEAD', 'pkg/handler/testdata')
  .split('\n')
  .filter((p) => p.endsWith('.yaml'))) {
  // sigs.k8s.io/yaml lets a repeated key win (rawPodWithsecCompProfile repeats serviceAccountName).
  const pod = parse(git('show', `HEAD:${path}`), { uniqueKeys: false });
  const ann: Record<string, string> = pod.metadata.annotations ?? {};
  const rel = path.slice('pkg/handler/'.length);
  const fixture: Record<string, unknown> = {
    peer: 'aws/amazon-eks-pod-identity-webhook',
    source: `${path}@${commit}`,
    case: `TestUpdatePodSpec/Pod ${pod.metadata.name} in file ${rel}`,
  };
  if (/^(1|t|true)$/i.test(ann[`${T}skip`] ?? '')) continue;

  const flags: Record<string, string> = {};
  if (ann[`${T}handler/region`] !== undefined) flags['aws-default-region'] = ann[`${T}handler/region`];
  if (ann[`${T}handler/mountPath`] !== undefined) flags['mount-path'] = ann[`${T}handler/mountPath`];
  const peerOnly: Record<string, string> = {};
  if (ann[`${T}containercredentials/uri`]) {
    // Relative to the repository's root (test/unit/peer-compat.test.ts resolves it there).
    flags['aws-container-credentials-config'] = join(outDir, ASSOCIATIONS);
    for (const [key, flag] of Object.entries(CONTAINER_CREDENTIALS_FLAGS)) {
      const value = ann[`${T}containercredentials/${key}`];
      if (value !== undefined) flags[flag] = value;
    }
  }
  const saAnn: Record<string, string> = {};
  if (ann[`${T}serviceAccount/roleArn`] !== undefined)
    saAnn['eks.amazonaws.com/role-arn'] = ann[`${T}serviceAccount/roleArn`];
  if (ann[`${T}serviceAccount/audience`] !== undefined)
    saAnn['eks.amazonaws.com/audience'] = ann[`${T}serviceAccount/audience`];
  for (const k of ['serviceAccount/sts-regional-endpoints', 'handler/injectSTS']) {
    if (ann[T + k] !== undefined) {
      saAnn['eks.amazonaws.com/sts-regional-endpoints'] = ann[T + k];
      break;
    }
  }
  for (const k of ['serviceAccount/token-expiration', 'handler/expiration']) {
    if (ann[T + k] !== undefined) {
      saAnn['eks.amazonaws.com/token-expiration'] = ann[T + k];
      break;
    }
  }
  const expectedPatch = ann[`${T}expectedPatch`];

  // The harness: namespace and ServiceAccount "default".
  for (const key of Object.keys(ann)) if (key.startsWith(T)) delete ann[key];
  if (Object.keys(ann).length === 0) delete pod.metadata.annotations;
  pod.metadata.namespace = 'default';
  pod.spec.serviceAccountName = 'default';

  fixture.flags = flags;
  if (Object.keys(peerOnly).length) fixture.peerFlags = peerOnly;
  fixture.serviceAccount = {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: 'default', namespace: 'default', annotations: saAnn },
  };
  fixture.pod = pod;
  fixture.expected = expectedPatch
    ? fastJsonPatch.applyPatch(structuredClone(pod), JSON.parse(expectedPatch), true, false).newDocument
    : pod;
  const name = basename(path, '.pod.yaml');
  const dir = path.includes('/containercredentials/') ? 'containercredentials-' : '';
  fixture.differences = DIFFERENCES[dir + name] ?? (expectedPatch ? ['injection-record', 'go-zero-values'] : []);
  if (WARNINGS[dir + name]) fixture.warnings = WARNINGS[dir + name];
  writeFileSync(join(outDir, `${dir}${name}.yaml`), stringify(fixture, { lineWidth: 0, aliasDuplicateObjects: false }));
}
