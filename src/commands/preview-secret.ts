import { WebhookError, isDenial } from '../errors.ts';
import type { Secret, ServiceAccountView } from '../kube/types.ts';
import { secretShapeError } from '../admission/secrets.ts';
import { decideSecret, planSecret, type SecretCoreOptions } from '../mutate/secret.ts';
import { GARDENER_PROVIDER_LABEL, PROVIDER_LABEL } from '../model.ts';
import { parseManifests } from '../manifests.ts';
import { renderOutput, type OutputFormat, type PreviewInput, type PreviewResult } from './preview.ts';

/** Whether the documents ask for a Secret's preview: a Secret among them and no Pod. */
export function isSecretPreview(input: PreviewInput): boolean {
  const kinds = parseManifests(input).map((m) => m.kind);
  return kinds.includes('Secret') && !kinds.includes('Pod');
}

function oneSecret(input: PreviewInput, what: string): Secret {
  const secrets = parseManifests(input).filter((m) => m.kind === 'Secret');
  if (secrets.length !== 1)
    throw new WebhookError('WIW_BAD_INPUT', `${what} needs exactly one Secret; found ${secrets.length}`);
  const secret = structuredClone(secrets[0]) as Secret;
  const shape = secretShapeError(secret);
  if (shape) throw new WebhookError('WIW_BAD_INPUT', `the Secret cannot be read: ${shape}`);
  // What the API server does before admission: stringData is merged into data, and dropped.
  if (secret.stringData !== undefined) {
    if (typeof secret.stringData !== 'object' || secret.stringData === null)
      throw new WebhookError('WIW_BAD_INPUT', 'stringData is not a map');
    secret.data = { ...secret.data };
    for (const [key, value] of Object.entries(secret.stringData))
      secret.data[key] = Buffer.from(String(value), 'utf8').toString('base64');
    delete secret.stringData;
  }
  return secret;
}

/**
 * The webhook's decision for one Secret, offline: CREATE, or UPDATE when the stored version is
 * given (`--old FILE`). ServiceAccounts among the documents stand in for the cluster's when the
 * Secret references one in another namespace. Same core as `serve`.
 */
export function previewSecret(
  core: SecretCoreOptions,
  input: PreviewInput,
  old: PreviewInput | undefined,
  format: OutputFormat,
): PreviewResult {
  const secret = oneSecret(input, 'preview');
  const oldSecret = old ? oneSecret(old, '--old') : undefined;
  const namespace = secret.metadata?.namespace || 'default';
  const warnings: string[] = [];

  const plan = planSecret(secret, namespace);
  if (isDenial(plan)) return { allowed: false, denial: plan, warnings };
  let referenced: ServiceAccountView | undefined;
  const ref = plan.read;
  if (ref) {
    const doc = parseManifests(input).find(
      (m) =>
        m.kind === 'ServiceAccount' &&
        m.metadata?.name === ref.name &&
        (m.metadata?.namespace || 'default') === ref.namespace,
    );
    if (doc)
      referenced = { namespace: ref.namespace, name: ref.name, uid: '', annotations: doc.metadata?.annotations ?? {} };
    else
      warnings.push(
        `ServiceAccount ${ref.namespace}/${ref.name} is not among the documents: previewed as if it did not exist`,
      );
  }

  const result = decideSecret(core, plan, { oldSecret, referencedServiceAccount: referenced });
  if (!result.allowed) return { allowed: false, denial: result.denial, warnings };
  warnings.push(...result.warnings);
  if (!result.selected)
    warnings.push(
      `the Secret has neither label ${PROVIDER_LABEL} nor Gardener's ${GARDENER_PROVIDER_LABEL}: the webhook leaves it alone`,
    );
  return { allowed: true, patch: result.patch, output: renderOutput(secret, result.patch, format), warnings };
}
