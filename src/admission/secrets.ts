import { denial } from '../errors.ts';
import type { Secret } from '../kube/types.ts';
import { planSecret, type SecretCoreOptions } from '../mutate/secret.ts';
import type { TenantJudges } from '../policy/gate.ts';
import { judgeSecret } from './judge-secret.ts';
import type { ServiceAccountLookup } from './pods.ts';
import { allowed, denied, patched, type AdmissionRequest, type Decision } from './review.ts';
import { METADATA_SHAPE, shapeError } from './shape.ts';
import { isObject, SERVICE_ACCOUNT_ANNOTATION, TOKEN_PATH_ANNOTATION } from '../model.ts';
import { MAX_SECRET_CONFIG_BYTES, MAX_SECRET_REFERENCE, MAX_TOKEN_PATH } from '../bounds.ts';

/** Checks the shape the Secret core relies on; the API server sends typed objects, others may not. */
export function secretShapeError(secret: unknown): string | undefined {
  if (!isObject(secret)) return 'the object is not a Secret';
  const { metadata, data } = secret as Secret;
  const meta = metadata === undefined ? undefined : shapeError(metadata, METADATA_SHAPE, 'metadata');
  if (meta) return meta;
  if (
    data !== undefined &&
    (typeof data !== 'object' ||
      data === null ||
      Array.isArray(data) ||
      Object.values(data).some((v) => typeof v !== 'string'))
  ) {
    return 'data is not a map of base64 strings';
  }
  return boundsProblem(secret as Secret);
}

// What the Secret core reads, each with its size: checked before it parses anything.
const SECRET_ANNOTATIONS: readonly [string, number][] = [
  [SERVICE_ACCOUNT_ANNOTATION, MAX_SECRET_REFERENCE],
  [TOKEN_PATH_ANNOTATION, MAX_TOKEN_PATH],
];
/** `config` is base64 in `data`: four characters for three bytes. */
const MAX_CONFIG_BASE64 = Math.ceil(MAX_SECRET_CONFIG_BYTES / 3) * 4;

function boundsProblem({ metadata, data }: Secret): string | undefined {
  const annotations = metadata?.annotations ?? {};
  for (const [key, max] of SECRET_ANNOTATIONS) {
    const value = Object.hasOwn(annotations, key) ? annotations[key] : undefined;
    if (value !== undefined && value.length > max)
      return `metadata.annotations[${JSON.stringify(key)}] is ${value.length} characters long, more than the ${max} it may have`;
  }
  const config = data && Object.hasOwn(data, 'config') ? data.config : undefined;
  if (config !== undefined && config.length > MAX_CONFIG_BASE64)
    return `data.config is ${config.length} characters of base64, more than the ${MAX_CONFIG_BASE64} of ${MAX_SECRET_CONFIG_BYTES} bytes a WorkloadIdentityConfig may have`;
  return undefined;
}

/**
 * Secrets on CREATE and UPDATE. The webhook configuration's objectSelector sends only labelled
 * Secrets; an unlabelled one that arrives anyway is admitted untouched. The webhook never reads
 * Secrets from the API: it sees them only here. A reference into another namespace is looked up
 * in the ServiceAccount cache.
 */
export async function admitSecret(
  core: SecretCoreOptions,
  lookup: ServiceAccountLookup,
  request: AdmissionRequest,
  tenantPolicy?: TenantJudges,
): Promise<Decision> {
  if ((request.operation !== 'CREATE' && request.operation !== 'UPDATE') || request.subResource) return allowed();
  const secret = request.object as Secret;
  const shape = secretShapeError(secret);
  if (shape) return denied(denial('MalformedObject', `the Secret cannot be read: ${shape}`));
  const old = request.operation === 'UPDATE' ? (request.oldObject as Secret | undefined) : undefined;
  // A stored version we cannot read sets nothing to keep; the new one is still judged in full.
  const oldSecret = old && !secretShapeError(old) ? old : undefined;
  const namespace = request.namespace || secret.metadata?.namespace || 'default';
  const result = await judgeSecret(
    core,
    planSecret(secret, namespace),
    {
      serviceAccount: async (ns, name) => lookup(ns, name),
      policy: tenantPolicy?.secret,
    },
    oldSecret,
  );
  if (!result.allowed) return denied(result.denial);
  if (!result.selected) return allowed();
  const audit: Record<string, string> = { 'secret-provider': result.derivation.provider };
  if (result.reference) audit['secret-service-account'] = `${result.reference.namespace}/${result.reference.name}`;
  return patched(result.patch, {
    warnings: result.warnings,
    auditAnnotations: audit,
    injected: [result.derivation.provider],
  });
}
