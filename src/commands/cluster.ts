// The three subcommands of the cluster's side of the handshake: doctor, trust, issuer publish.
import { readFileSync } from 'node:fs';
import { stringify } from 'yaml';
import type { Config } from '../config.ts';
import { runDoctor } from '../doctor/checks.ts';
import { type Check, exitCode, reportData, reportText } from '../doctor/verdicts.ts';
import { ioProblem, UsageError, WebhookError } from '../errors.ts';
import { loadKubeConfig } from '../kube/client.ts';
import { connectKube } from '../kube/connect.ts';
import type { Owner } from '../doctor/owners.ts';
import { slippedChecks } from '../doctor/slipped-report.ts';
import { publishIssuer } from '../issuer/publish.ts';
import { jwksFromKeyFiles } from '../issuer/keys.ts';
import { apiServerOf, readApiServerDiscovery, readApiServerJwks } from '../issuer/read.ts';
import { issuerProblem } from '../issuer/discovery.ts';
import { shellQuote } from '../shell.ts';
import { createProviders, createSecretProviders } from '../clouds/index.ts';
import type { ManifestInput } from '../manifests.ts';
import { identitiesOfSecrets, identitiesOfServiceAccounts } from '../trust/identities.ts';
import { trustFailed, trustReport, trustText } from '../trust/report.ts';
import { objectsOfCluster, objectsOfManifests, type Objects } from '../trust/sources.ts';

/** -o of doctor and trust: text for a person, the same data as JSON or YAML for a script. */
export type DataOutput = 'text' | 'json' | 'yaml';

interface IssuerCommandInput {
  config: Config;
  files: ManifestInput['documents'];
  output: DataOutput;
  issuer?: string;
  issuerCa?: string;
  namespace?: string;
  dir?: string;
  keyFiles: string[];
  /** doctor: told what it waits for (a terminal's progress line). */
  progress?: (waitingFor: string) => void;
  /** doctor: the stream the text report goes to; util.styleText colours it when that stream may be. */
  colourStream?: NodeJS.WritableStream;
  /** doctor --fix: restart the owners of the Pods that slipped past; `confirm` asks first (absent: --yes). */
  fix?: { confirm?: (owners: readonly Owner[]) => Promise<boolean> };
}

/** data as -o json or -o yaml write it; undefined for text. */
function dataOutput(data: unknown, output: DataOutput): string | undefined {
  if (output === 'json') return JSON.stringify(data, null, 2) + '\n';
  if (output === 'yaml') return stringify(data, { lineWidth: 0 });
  return undefined;
}

interface CommandResult {
  code: number;
  output: string;
  warnings: string[];
}

export async function runIssuerCommand(command: string, input: IssuerCommandInput): Promise<CommandResult> {
  switch (command) {
    case 'doctor':
      return doctor(input);
    case 'trust':
      return trust(input);
    default:
      return publish(input);
  }
}

async function doctor(input: IssuerCommandInput): Promise<CommandResult> {
  if (input.files.length > 0) throw new UsageError('doctor reads the cluster; -f is for trust and preview');
  let issuerCa: string | undefined;
  if (input.issuerCa) {
    try {
      issuerCa = readFileSync(input.issuerCa, 'utf8');
    } catch (err) {
      throw new WebhookError('WIW_BAD_INPUT', `cannot read --issuer-ca ${input.issuerCa}: ${ioProblem(err)}`);
    }
  }
  const report = await runDoctor({
    kc: loadKubeConfig(input.config.kubeconfig, input.config.kubeContext),
    providers: createProviders(input.config),
    secrets: { providers: createSecretProviders(input.config), defaultTokenPath: input.config.secretTokenPath },
    issuerCa,
    namespace: input.namespace,
    progress: input.progress,
    settings: input.config,
  });
  // The Pods that slipped past the webhook: their own step, read whatever the issuer checks found
  // (unless the API server could not be reached at all).
  if (!report.checks.some((c) => c.id === 'api-server')) await addSlipped(input, report.checks);
  return {
    code: exitCode(report),
    output: dataOutput(reportData(report), input.output) ?? reportText(report, { stream: input.colourStream }),
    warnings: [],
  };
}

async function addSlipped(input: IssuerCommandInput, checks: Check[]): Promise<void> {
  const api = await connectKube(input.config.kubeconfig, input.config.kubeContext);
  try {
    checks.push(
      ...(await slippedChecks({
        api,
        providers: createProviders(input.config),
        namespace: input.namespace,
        fix: input.fix,
        waiting: input.progress,
      })),
    );
  } finally {
    api.close();
  }
}

async function trust(input: IssuerCommandInput): Promise<CommandResult> {
  let objects: Objects;
  let issuer = input.issuer;
  const warnings: string[] = [];
  if (input.files.length > 0) {
    if (!issuer)
      throw new UsageError(
        "trust -f FILE needs --issuer URL (the cluster's --service-account-issuer): offline, nothing else tells it",
      );
    objects = objectsOfManifests({ documents: input.files });
    if (input.namespace)
      objects = {
        accounts: objects.accounts.filter((a) => a.namespace === input.namespace),
        secrets: objects.secrets.filter((s) => s.metadata?.namespace === input.namespace),
      };
  } else {
    const kc = loadKubeConfig(input.config.kubeconfig, input.config.kubeContext);
    const discovery = await readApiServerDiscovery(await apiServerOf(kc));
    if (!issuer) {
      if (!discovery.ok)
        throw new WebhookError(
          'WIW_ISSUER_UNKNOWN',
          `cannot read the issuer from the API server (${discovery.url}: ${discovery.problem}); pass --issuer URL, and run doctor`,
        );
      issuer = discovery.value.issuer;
    } else if (discovery.ok && discovery.value.issuer !== issuer) {
      warnings.push(
        `the cluster's tokens carry iss ${discovery.value.issuer}, not --issuer ${issuer}: a cloud given this trust refuses them`,
      );
    }
    objects = await objectsOfCluster(kc, input.namespace);
    warnings.push(...(objects.warnings ?? []));
  }
  const form = issuerProblem(issuer);
  if (form) throw new WebhookError('WIW_BAD_INPUT', `the issuer ${form}: it is not printed into commands`);
  if (issuer.endsWith('/'))
    warnings.push(`the issuer ${issuer} ends with "/": AWS refuses such tokens; see workload-identity-webhook doctor`);
  const fromAccounts = identitiesOfServiceAccounts(createProviders(input.config), objects.accounts);
  const fromSecrets = identitiesOfSecrets(
    { providers: createSecretProviders(input.config), defaultTokenPath: input.config.secretTokenPath },
    objects.secrets,
    objects.accounts,
  );
  const problems = [...fromAccounts.problems, ...fromSecrets.problems];
  warnings.push(...problems.map((p) => `${p} (left out)`));
  const report = trustReport(issuer, [...fromAccounts.identities, ...fromSecrets.identities], {
    settings: input.config,
    accounts: objects.accounts,
    namespace: input.namespace,
  });
  return {
    code: problems.length > 0 || trustFailed(report) ? 1 : 0,
    output: dataOutput(report, input.output) ?? trustText(report),
    warnings,
  };
}

async function publish(input: IssuerCommandInput): Promise<CommandResult> {
  if (!input.dir) throw new UsageError('issuer publish needs --dir DIR');
  if (input.files.length > 0) throw new UsageError('issuer publish reads keys with --key-file, not -f');
  let issuer = input.issuer;
  let jwks;
  if (input.keyFiles.length > 0) {
    if (!issuer) throw new UsageError('issuer publish --key-file needs --issuer URL: the URL where DIR will be served');
    jwks = jwksFromKeyFiles(input.keyFiles);
  } else {
    const api = await apiServerOf(loadKubeConfig(input.config.kubeconfig, input.config.kubeContext));
    const read = await readApiServerJwks(api);
    if (!read.ok)
      throw new WebhookError(
        'WIW_ISSUER_UNKNOWN',
        `cannot read the API server's JWKS (${read.url}: ${read.problem}); pass --key-file with the --service-account-key-file files`,
      );
    jwks = read.value;
    if (!issuer) {
      const discovery = await readApiServerDiscovery(api);
      if (!discovery.ok)
        throw new WebhookError(
          'WIW_ISSUER_UNKNOWN',
          `cannot read the issuer from the API server (${discovery.problem}); pass --issuer URL`,
        );
      issuer = discovery.value.issuer;
    }
  }
  const pub = await publishIssuer(input.dir, issuer, jwks);
  const output = [
    `wrote ${pub.files.map((f) => `${input.dir}/${f}`).join(' and ')} (${pub.jwks.keys.length} key(s): ${pub.jwks.keys.map((k) => k.kid).join(', ')})`,
    `serve ${input.dir} at ${issuer} without credentials, then start kube-apiserver with:`,
    ...pub.apiServerFlags.map((f) => `  ${shellQuote(f)}`),
  ];
  return { code: 0, output: output.join('\n') + '\n', warnings: [] };
}
