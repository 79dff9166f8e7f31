import type { Logger } from 'pino';
import type { AnnotationBound } from '../annotation-bounds.ts';
import type { Registry } from 'prom-client';
import type { Denial } from '../errors.ts';
import type { Container, EnvVar, Pod, ServiceAccountView, Volume, VolumeMount } from '../kube/types.ts';

import type { ProviderName } from './registry.ts';
import type { CloudSettings } from './settings.ts';
import type { SecretProvider } from './secret-config.ts';
import type { SpecReader } from '../spec-reader.ts';

/**
 * Everything one provider adds to a Pod. The mutation core turns it into additive JSON Patch
 * operations; providers never see the patch.
 */
export interface Injection {
  provider: ProviderName;
  /** The projected volume: a ServiceAccount token with this provider's audience, and any files. */
  volume: Volume;
  mountPath: string;
  /** The same volume mounted again at these paths (Azure: its token where each peer release put it). */
  extraMountPaths?: string[];
  /** More volumes, each mounted into every container the provider serves (pfnet's layout). */
  extraVolumes?: { volume: Volume; mount: VolumeMount }[];
  /** Runs before every other init container (pfnet's gcloud setup); never mutated itself. */
  initContainer?: Container;
  /**
   * Other commands of the same setup (pfnet's own script): an init container of that name, with
   * one of them and otherwise `initContainer`'s image and env, is the peer's setup already there
   * (both webhooks installed during a migration), not a conflict.
   */
  initContainerAlike?: readonly (readonly string[])[];
  /**
   * Containers added whole (the Azure peer's proxy), already carrying what this provider gives a
   * container; never mutated. A container of the same name in the Pod is kept instead, as the peer does.
   */
  addedContainers?: AddedContainer[];
  /**
   * Env vars in groups: a group is added to a container only when none of its names is set
   * there already (AWS_REGION and AWS_DEFAULT_REGION travel together; most groups hold one).
   */
  envGroups: EnvVar[][];
  /**
   * Env groups for the named containers (or init containers) in place of `envGroups`: what one
   * container gets differs from the rest (Azure's client id per container, a region left to
   * envFrom, a container's own web identity). A Map: container names are the Pod author's
   * (`__proto__`, `toString`).
   */
  containerEnvGroups?: ReadonlyMap<string, EnvVar[][]>;
  /**
   * An env var added only when the container sets none of these names either (GCP's
   * GOOGLE_CLOUD_PROJECT is left out where the container names its own CLOUDSDK_CORE_PROJECT).
   */
  envGuards?: Readonly<Record<string, readonly string[]>>;
  /**
   * The variables that carry the credential itself (a token file, a role, a credential file):
   * a container whose own value differs keeps it, and the admission warns that the injected
   * identity is not what that container uses.
   */
  credentialEnv?: ReadonlySet<string>;
  /** Pod annotations the volume projects through the downward API (the GCP credential file). */
  annotations: Record<string, string>;
  /** Pod labels (the AWS peer's `eks.amazonaws.com/pod-identity: enabled`). */
  labels?: Record<string, string>;
  /** Container and init container names this provider leaves alone. */
  skipContainers: ReadonlySet<string>;
  /**
   * The container already configures this identity itself when it sets, of each of these lists,
   * at least one name: the provider adds nothing to it, not even the mount. Data, not a function:
   * the policy mode's CEL evaluates it too.
   */
  configuredBy?: readonly (readonly string[])[];
  /** The identity claimed, for logs, audit annotations and tenant policy. */
  identity: Record<string, string>;
  /**
   * More identities of this cloud the same Pod may claim (AWS profiles, Azure client ids per
   * container, GCP providers), each a whole record like `identity`: tenant policy judges each one
   * and `trust` prints each one. `audience`, when set, is the token that identity presents.
   */
  additionalIdentities?: Record<string, string>[];
  /** Shown to the client by the API server; the Pod is still admitted. */
  warnings?: string[];
}

export interface AddedContainer {
  list: 'initContainers' | 'containers';
  /** Before or after the Pod's own containers of that list. */
  at: 'first' | 'last';
  container: Container;
}

export interface PodContext {
  pod: Pod;
  namespace: string;
  /** Undefined when the Pod's ServiceAccount does not exist (yet). */
  serviceAccount: ServiceAccountView | undefined;
  /** The Pod runs on Windows nodes: token paths in env vars and files are Windows paths. */
  windows: boolean;
}

/**
 * What a provider reads of the Pod itself, each with its size (src/bounds.ts): admission checks
 * them before any work, so a Pod over one is refused by name and bound and costs nothing more.
 */
export interface PodReads {
  /** Pod annotations: the longest value each may have; a list's separator, to count its entries. */
  readonly annotations: readonly { key: string; max: number; separator?: string }[];
  /** Variables whose value a container may set and the webhook compares with its own. */
  readonly credentialEnv: ReadonlySet<string>;
}

/**
 * The Pod's labels and annotations that select what a provider serves, as data: the policy mode
 * (MutatingAdmissionPolicy) evaluates them in CEL, where resolvePod cannot run.
 */
export interface PodSelection {
  /** The Pod opts in by this label, exactly this value (Azure's `azure.workload.identity/use: "true"`). */
  readonly requireLabel?: { readonly key: string; readonly value: string };
  /** A Pod carrying this label, any value, is left alone. */
  readonly skipLabel?: string;
  /** The Pod annotations naming containers to leave alone or to serve only, and their separator. */
  readonly containers: { readonly skip: string; readonly include: string; readonly separator: string };
}

export interface PodProvider {
  readonly name: ProviderName;
  /**
   * The ServiceAccount annotation keys this provider reads, each with its bound: the cache keeps
   * only these, and a ServiceAccount with one over its bound only as a marker.
   */
  readonly serviceAccountAnnotations: readonly AnnotationBound[];
  /** What it reads of the Pod, bounded. */
  readonly podReads: PodReads;
  /** Which Pods and containers it serves, as the policy mode's CEL reads them (src/policy-mode). */
  readonly podSelection: PodSelection;
  /** undefined: this provider has nothing to inject into this Pod. */
  resolvePod(ctx: PodContext): Injection | Denial | undefined;
}

/**
 * The values tenant policy's defaults give one identity (docs/policy.md), field by field: a CEL
 * default's, else the matched identity provider's; undefined keeps the flag's value.
 */
export interface PolicyDefaults {
  region?: string;
  tenant?: string;
  audience?: string;
  tokenExpirationSeconds?: number;
}

/**
 * What tenant policy puts in place of a cloud's flags for one identity: the defaults' values and
 * the matched identity provider, whose own fields (`Declared`) its cloud reads as it will (Azure:
 * a national cloud and authority host).
 */
export interface PolicyOverrides<Declared extends object> {
  values: PolicyDefaults;
  declared: Declared | undefined;
}

/** One identity a Pod requests, as tenant policy hands it to its cloud's `settle`. */
interface PolicyRequest<Options extends object, Declared extends object, Identity> {
  /** The identity the injection claims. */
  identity: Identity;
  serviceAccount: Pick<ServiceAccountView, 'annotations'> | undefined;
  options: Options;
  /** The cloud's declared identity providers, in policy order. */
  declared: readonly Declared[];
  /** The policies' CEL defaults for an identity as the Pod requests it, or the denial of a failing one. */
  defaults(identity: Identity): PolicyDefaults | Denial;
}

/** The identity to match and validate, and the defaults that apply to it. */
export interface SettledRequest<Identity> {
  identity: Identity;
  defaults: PolicyDefaults;
}

/** An OpenAPI v3 schema, as a CRD holds it. */
export type JsonSchema = { readonly [keyword: string]: unknown };

/**
 * Tenant policy's part of one cloud (docs/policy.md): its identity providers' fields in a policy,
 * what a policy sees of its identities and how they are described in denials. `Declared` is the
 * cloud's part of a declared identity provider, `Field` the cloud's fields of `identity` in CEL.
 */
export interface CloudPolicy<Options extends object, Declared extends object, Field extends string> {
  /** `identity.<field>` in CEL besides provider, identityProvider and audience; empty for other clouds. */
  readonly identityFields: readonly Field[];
  /**
   * Its part of the CRD, spec.identityProviders[].<cloud>: the declared fields' schemas (their
   * names are the fields parseDeclared reads) and descriptions of the defaults' fields; the
   * defaults' own schemas come from its facts (policy/schema.ts).
   */
  readonly schema: {
    description?: string;
    required?: readonly string[];
    properties: Readonly<Record<string, JsonSchema>>;
    defaults?: { region?: string; audience?: string };
  };
  /** Reads the declared fields; problems go to the reader. */
  parseDeclared(r: SpecReader, o: Record<string, unknown>, path: string): Declared;
  /** The identity a provider's identity record (Pod injection or Secret derivation) claims. */
  identity(raw: Readonly<Record<string, string>>): Record<Field, string>;
  /** The identity in a denial: "AWS account 1 (partition aws) of role arn:...". */
  describeIdentity(id: Readonly<Record<Field, string>>): string;
  /** Where a declared identity provider points, in a denial: "accounts 1, 2". */
  describeDeclared(p: Declared): string;
  /** "exact" is taken at once; "wide" (a whole AWS partition) only when nothing matches exactly. */
  match(p: Declared, id: Readonly<Record<Field, string>>): 'exact' | 'wide' | undefined;
  /**
   * What the Pod requests and which defaults apply, where the cloud decides it itself (Azure: only
   * a tenant the ServiceAccount names is requested; any other is a default: computed, the one
   * declared tenant, or the flag's). Without it, the identity the injection claims is requested and
   * every default applies.
   */
  settle?<Identity extends Record<Field, string>>(
    request: PolicyRequest<Options, Declared, Identity>,
  ): SettledRequest<Identity> | Denial;
}

/** An identity the webhook hands out, with the token's subject and audience: what a cloud must trust. */
export interface TrustIdentity {
  cloud: ProviderName;
  /** Where it was read: `ServiceAccount ns/name` or `Secret ns/name`. */
  source: string;
  namespace: string;
  serviceAccount: string;
  /** The token's `sub`. */
  subject: string;
  /** The token's `aud`: exactly the audience the webhook (or the token requestor) requests. */
  audience: string;
  /** Projected token lifetime; undefined for labelled Secrets (the token requestor decides). */
  expirationSeconds?: number;
  /** The provider's identity record: roleArn, clientId and tenantId, workloadIdentityProvider and serviceAccountEmail... */
  identity: Record<string, string>;
}

/** What `trust` and `doctor` read besides the identities: the flags, and every ServiceAccount read. */
export interface TrustContext {
  settings: CloudSettings;
  accounts: readonly ServiceAccountView[];
  /** `--namespace`: only this namespace's ServiceAccounts were read. */
  namespace?: string;
}

/**
 * Something the cloud would refuse or the webhook's configuration disagrees with, known before
 * the cloud is asked: `trust` prints it as a FAIL (or WARN) comment, `doctor` as a check.
 */
export interface TrustFinding {
  /** doctor's check id: `cloud-limits` or the cloud's own (`pod-identity-associations`). */
  check: string;
  /** 'pass': the cloud checked this and found it right (doctor shows it; trust prints nothing). */
  verdict: 'fail' | 'warn' | 'pass';
  /** What it is about: `role arn:...`, `client id ...`, `ServiceAccount ns/name`. */
  subject: string;
  message: string;
  fix: string;
}

/** `trust` and `doctor`'s part of one cloud (docs/trust.md). */
export interface CloudTrust<Report> {
  /** The service that verifies this cloud's federated tokens, in doctor's messages. */
  readonly verifier: string;
  /** Signing algorithms it accepts. */
  readonly algorithms: readonly string[];
  /** Labels a Pod needs for this cloud's provider to inject at all (Azure's opt-in). */
  readonly podLabels?: Readonly<Record<string, string>>;
  /** Whether an injection's identity is one the cloud must trust (Azure injects for any labelled Pod). */
  names?(identity: Readonly<Record<string, string>>): boolean;
  /**
   * Whether the cloud sees the token for this identity (false: AWS role chaining, where the role
   * is assumed with another role's credentials): doctor checks the token where it is presented.
   */
  presentsToken?(identity: Readonly<Record<string, string>>): boolean;
  /**
   * Why an identity's fields are not of the form its commands take, or undefined. Such an identity
   * gets a FAIL line instead of commands: its values never reach a shell.
   */
  problem(identity: Readonly<Record<string, string>>): string | undefined;
  /**
   * The cloud-side configuration that accepts these identities' tokens (only this cloud's are
   * given, each with no `problem`); every command word quoted (src/shell.ts).
   */
  report(issuer: string, identities: readonly TrustIdentity[], context: TrustContext): Report;
  /**
   * Whether the cloud has a part without identities of its own (AWS: EKS Pod Identity
   * associations, whose tokens are not trusted through the issuer).
   */
  hasPart?(context: TrustContext): boolean;
  /** What in the report is over the cloud's documented limits or disagrees with the configuration. */
  findings(report: Report): TrustFinding[];
  /** The report as text: a heading, comments and commands. */
  text(report: Report): string[];
}

/** One Pod review answered, as the peers' metrics see it. */
export interface PodReviewObservation {
  /** The route that answered: /mutate, /mutate/fail or /mutate/ignore. */
  path: string;
  code: number;
  seconds: number;
  /** The request's namespace as a label value: one the cluster has, or a fixed stand-in (the caller bounds it). */
  namespace: string;
  labels: Readonly<Record<string, string>> | undefined;
  /** What was injected (empty when nothing was, or the Pod was refused). */
  injections: readonly Injection[];
}

export interface PeerMetrics {
  observePod(review: PodReviewObservation): void;
  /** The namespace is gone: its series go too. */
  forgetNamespace?(namespace: string): void;
}

export interface PeerMetricsOptions {
  /** Label series by namespace where the peer does (off: one series, for clusters with thousands of namespaces). */
  namespaceLabel: boolean;
}

/** A cloud's peer webhook's metric names, served beside ours so its dashboards keep working after a migration. */
export type PeerMetricsFactory = (registry: Registry, options: PeerMetricsOptions) => PeerMetrics;

/**
 * One cloud, as the rest of the webhook sees it: its Pod provider's options from the flags (plain
 * data), those options with tenant policy's overrides (its own identity providers' fields typed), the Pod provider built from options, the
 * Secret provider, its tenant policy part and its trust part. Facts needed below the providers
 * (bounds, names) are its facts.ts, listed in CLOUDS.
 */
export interface Cloud<
  Options extends object,
  Declared extends object = object,
  Field extends string = string,
  TrustReport = unknown,
> {
  readonly name: ProviderName;
  options(settings: CloudSettings): Options;
  withOverrides(options: Options, overrides: PolicyOverrides<Declared>): Options;
  podProvider(options: Options): PodProvider;
  secretProvider(settings: CloudSettings): SecretProvider;
  readonly policy: CloudPolicy<Options, Declared, Field>;
  readonly trust: CloudTrust<TrustReport>;
  readonly peerMetrics: PeerMetricsFactory;
  /** What the cloud keeps current while serving (a file it reloads); returns what stops it. */
  start?(settings: CloudSettings, log: Logger): () => void;
}
