import { PROVIDER_NAMES } from '../clouds/registry.ts';
import { denial, type Denial, isDenial, mergeDenials } from '../errors.ts';
import type { Secret, ServiceAccountView } from '../kube/types.ts';
import { parseSecretConfig, type SecretDerivation, type SecretProvider } from '../clouds/secret-config.ts';
import type { SecretProviders } from '../clouds/index.ts';
import type { ProviderName } from '../clouds/registry.ts';
import { setMembers, type PatchOperation } from './patch.ts';
import {
  GARDENER_PROVIDER_LABEL,
  GARDENER_PURPOSE,
  GARDENER_PURPOSE_LABEL,
  PROVIDER_LABEL,
  SERVICE_ACCOUNT_ANNOTATION,
  TOKEN_PATH_ANNOTATION,
  isTokenPath,
} from '../model.ts';
import { checkReferenceGrant, parseServiceAccountReference, type ServiceAccountReference } from './secret-reference.ts';

const PROVIDERS: readonly ProviderName[] = PROVIDER_NAMES;

export interface SecretSelection {
  provider: ProviderName;
  /** Carries the project's label: the token is issued for a referenced ServiceAccount. */
  project: boolean;
  /** Carries Gardener's labels. Gardener's annotations point into the garden cluster and are never judged. */
  gardener: boolean;
}

/**
 * Whether the webhook handles this Secret, and for which provider. undefined: not a workload
 * identity Secret of ours (unlabelled, or Gardener's Secret of another provider such as alicloud).
 */
export function selectSecret(secret: Secret): SecretSelection | Denial | undefined {
  const labels = secret.metadata?.labels ?? {};
  const own = labels[PROVIDER_LABEL];
  const gardener = labels[GARDENER_PURPOSE_LABEL] === GARDENER_PURPOSE ? labels[GARDENER_PROVIDER_LABEL] : undefined;
  if (own !== undefined) {
    if (!(PROVIDERS as readonly string[]).includes(own)) {
      return denial('UnknownProvider', `label ${PROVIDER_LABEL}="${own}" must be one of: ${PROVIDERS.join(', ')}`);
    }
    if (gardener !== undefined && gardener !== own) {
      return denial(
        'ConflictingLabels',
        `label ${PROVIDER_LABEL}="${own}" and label ${GARDENER_PROVIDER_LABEL}="${gardener}" name different providers; keep one`,
      );
    }
    return { provider: own as ProviderName, project: true, gardener: gardener !== undefined };
  }
  if (gardener !== undefined && (PROVIDERS as readonly string[]).includes(gardener)) {
    return { provider: gardener as ProviderName, project: false, gardener: true };
  }
  return undefined;
}

/**
 * What the core needs to know before it decides, worked out once: whether the Secret is ours
 * (and for which provider), the reference parsed, and what must be read first: the referenced
 * ServiceAccount when it is in another namespace, whose grant decides. Pure; a Denial when the
 * labels already refuse the Secret.
 */
export type SecretPlan =
  | { secret: Secret; namespace: string; selection: undefined; reference: undefined; read: undefined }
  | {
      secret: Secret;
      /** The request's namespace: the Secret's own. */
      namespace: string;
      selection: SecretSelection;
      /** The ServiceAccount the token is issued for (project label only), or why the annotation is refused. */
      reference: ServiceAccountReference | Denial | undefined;
      /** The ServiceAccount to read before deciding: a reference into another namespace. */
      read: ServiceAccountReference | undefined;
    };

export function planSecret(secret: Secret, namespace: string): SecretPlan | Denial {
  const selection = selectSecret(secret);
  if (selection === undefined) return { secret, namespace, selection, reference: undefined, read: undefined };
  if (isDenial(selection)) return selection;
  const reference = selection.project
    ? parseServiceAccountReference(secret.metadata?.annotations?.[SERVICE_ACCOUNT_ANNOTATION], namespace)
    : undefined;
  const read = reference && !isDenial(reference) && reference.namespace !== namespace ? reference : undefined;
  return { secret, namespace, selection, reference, read };
}

export interface SecretCoreOptions {
  providers: SecretProviders;
  /** Token path when the Secret has no token-path annotation (--secret-token-path). */
  defaultTokenPath: string;
}

/** What the core is told besides the plan. */
export interface SecretFacts {
  /** The stored Secret on UPDATE; undefined on CREATE. */
  oldSecret?: Secret;
  /** The ServiceAccount the plan's `read` names, as read (undefined: it does not exist, or nothing was read). */
  referencedServiceAccount?: ServiceAccountView;
}

export interface SecretAdmission extends SecretFacts {
  secret: Secret;
  /** The request's namespace: the Secret's own. */
  namespace: string;
}

export type SecretMutation =
  | { allowed: true; selected: false; patch: PatchOperation[]; warnings: string[] }
  | {
      allowed: true;
      selected: true;
      selection: SecretSelection;
      patch: PatchOperation[];
      derivation: SecretDerivation;
      /** The ServiceAccount the token is issued for (project label only). */
      reference: ServiceAccountReference | undefined;
      warnings: string[];
    }
  | { allowed: false; denial: Denial };

export function resolveTokenPath(secret: Secret, defaultTokenPath: string): string | Denial {
  const value = secret.metadata?.annotations?.[TOKEN_PATH_ANNOTATION];
  if (value === undefined) return defaultTokenPath;
  if (!isTokenPath(value)) {
    return denial(
      'InvalidTokenPath',
      `annotation ${TOKEN_PATH_ANNOTATION}="${value}" must be an absolute path of letters, digits and . _ - / (or a Windows path such as C:\\var\\run\\token)`,
    );
  }
  return value;
}

/**
 * The pure core for Secrets: a Secret (and its stored version on UPDATE) in, a Denial or additive
 * JSON Patch out. The patch sets only derived keys: `add` when absent, `replace` when different
 * (a token writer dropped them, or someone edited them by hand). `token`, `config` and every other
 * key are never touched. No I/O, no clock: preview, `trust` and the tests call this; admission and
 * the token requestor read what the plan names first (`admission/judge-secret.ts`).
 */
export function mutateSecret(options: SecretCoreOptions, admission: SecretAdmission): SecretMutation {
  return decideSecret(options, planSecret(admission.secret, admission.namespace), admission);
}

/** The decision for a planned Secret, given what the plan said to read. Pure. */
export function decideSecret(
  options: SecretCoreOptions,
  plan: SecretPlan | Denial,
  facts: SecretFacts,
): SecretMutation {
  if (isDenial(plan)) return { allowed: false, denial: plan };
  const { secret, namespace, selection } = plan;
  if (selection === undefined) return { allowed: true, selected: false, patch: [], warnings: [] };

  const problems: Denial[] = [];
  const warnings: string[] = [];
  const annotations = secret.metadata?.annotations ?? {};
  let reference: ServiceAccountReference | undefined;
  if (selection.project) {
    if (isDenial(plan.reference)) problems.push(plan.reference);
    else if (plan.reference) {
      reference = plan.reference;
      const refused = checkReferenceGrant(reference, namespace, facts.referencedServiceAccount);
      if (refused) problems.push(refused);
    }
    if (selection.gardener) {
      warnings.push(
        `the Secret carries both ${PROVIDER_LABEL} and Gardener's labels, so two token requestors would write its token; keep one of them`,
      );
    }
  } else if (annotations[SERVICE_ACCOUNT_ANNOTATION] !== undefined) {
    warnings.push(
      `annotation ${SERVICE_ACCOUNT_ANNOTATION} has no effect without label ${PROVIDER_LABEL}: Gardener's token requestor writes this Secret's token`,
    );
  }

  const tokenPath = resolveTokenPath(secret, options.defaultTokenPath);
  if (typeof tokenPath !== 'string') problems.push(tokenPath);

  const provider = options.providers[selection.provider];
  let derivation: SecretDerivation | undefined;
  if (typeof tokenPath === 'string') {
    const result = derive(provider, secret, tokenPath);
    if (Array.isArray(result)) problems.push(...result);
    else derivation = result;
  }

  const { oldSecret } = facts;
  if (oldSecret && derivation)
    problems.push(
      ...accountChanges(provider, selection, oldSecret, secret.data?.config, derivation, tokenPath as string),
    );

  if (problems.length > 0 || !derivation) return { allowed: false, denial: mergeDenials(problems) };

  const patch: PatchOperation[] = [];
  const encoded: Record<string, string> = {};
  for (const [key, value] of Object.entries(derivation.keys))
    encoded[key] = Buffer.from(value, 'utf8').toString('base64');
  setMembers(patch, '/data', secret.data, encoded);
  return { allowed: true, selected: true, selection, patch, derivation, reference, warnings };
}

function derive(provider: SecretProvider, secret: Secret, tokenPath: string): SecretDerivation | Denial[] {
  const parsed = parseSecretConfig(provider, secret.data?.config);
  if ('denial' in parsed) return [parsed.denial];
  return provider.derive(parsed.config, { tokenPath });
}

/** GEP-26: an UPDATE keeps the cloud account (Azure tenant and subscription, GCP project) and the provider. */
function accountChanges(
  provider: SecretProvider,
  selection: SecretSelection,
  oldSecret: Secret,
  config: string | undefined,
  derivation: SecretDerivation,
  tokenPath: string,
): Denial[] {
  const old = selectSecret(oldSecret);
  // An old version that was no workload identity Secret (or was refused) sets no account to keep.
  if (old === undefined || isDenial(old)) return [];
  if (old.provider !== selection.provider) {
    return [
      denial(
        'ImmutableProvider',
        `the provider cannot change from ${old.provider} to ${selection.provider}: a workload identity Secret stays with one cloud account; create a new Secret instead`,
      ),
    ];
  }
  // Most UPDATEs are token renewals with `config` unchanged, and AWS has no account field:
  // then there is nothing to compare and the stored config is not parsed a second time.
  if (oldSecret.data?.config === undefined || Object.keys(derivation.account).length === 0) return [];
  if (oldSecret.data.config === config) return [];
  const before = derive(provider, oldSecret, tokenPath);
  if (Array.isArray(before)) return [];
  const changes: Denial[] = [];
  for (const [field, value] of Object.entries(derivation.account)) {
    const previous = before.account[field];
    if (previous !== undefined && previous !== value) {
      changes.push(
        denial(
          'ImmutableAccount',
          `config.${field} cannot change from "${previous}" to "${value}": a workload identity Secret stays with one cloud account; create a new Secret for another`,
        ),
      );
    }
  }
  return changes;
}
