import { WebhookError, type Denial } from '../errors.ts';
import { isNamespaceName, isObject, isObjectName } from '../model.ts';
import type { PatchOperation } from '../mutate/patch.ts';
import type { Injection } from '../clouds/types.ts';

interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

export interface AdmissionRequest {
  uid: string;
  kind: GroupVersionKind;
  resource?: { group: string; version: string; resource: string };
  subResource?: string;
  name?: string;
  namespace?: string;
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  object?: unknown;
  oldObject?: unknown;
  dryRun?: boolean;
}

interface AdmissionReview {
  apiVersion: 'admission.k8s.io/v1' | 'admission.k8s.io/v1beta1';
  request: AdmissionRequest;
}

const API_VERSIONS = new Set(['admission.k8s.io/v1', 'admission.k8s.io/v1beta1']);
const OPERATIONS = new Set(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']);

function bad(message: string): WebhookError {
  return new WebhookError('WIW_BAD_ADMISSION_REVIEW', message);
}

/** Validates the envelope; the objects inside are the handlers' to check. */
export function parseAdmissionReview(body: unknown): AdmissionReview {
  if (!isObject(body)) throw bad('the body is not a JSON object; expected an AdmissionReview');
  if (body.kind !== 'AdmissionReview') throw bad(`kind is ${JSON.stringify(body.kind)}; expected "AdmissionReview"`);
  if (typeof body.apiVersion !== 'string' || !API_VERSIONS.has(body.apiVersion)) {
    throw bad(`apiVersion is ${JSON.stringify(body.apiVersion)}; expected admission.k8s.io/v1 (or v1beta1)`);
  }
  const request = body.request;
  if (!isObject(request)) throw bad('request is missing: an AdmissionReview sent to a webhook carries a request');
  if (typeof request.uid !== 'string' || request.uid === '') throw bad('request.uid is missing or not a string');
  const kind = request.kind;
  if (
    !isObject(kind) ||
    typeof kind.kind !== 'string' ||
    typeof kind.version !== 'string' ||
    typeof kind.group !== 'string'
  ) {
    throw bad('request.kind must be an object with group, version and kind strings');
  }
  if (typeof request.operation !== 'string' || !OPERATIONS.has(request.operation)) {
    throw bad(`request.operation is ${JSON.stringify(request.operation)}; expected CREATE, UPDATE, DELETE or CONNECT`);
  }
  if (request.object !== undefined && request.object !== null && !isObject(request.object))
    throw bad('request.object must be an object');
  if (request.oldObject !== undefined && request.oldObject !== null && !isObject(request.oldObject))
    throw bad('request.oldObject must be an object');
  namesProblem(request);
  // Checked field by field above; TypeScript cannot follow checks on a Record into the interface.
  return body as unknown as AdmissionReview;
}

/** A name as the API server sends it: absent or empty (a name still to be generated), or valid. */
const nameOrEmpty = (value: unknown, valid: (v: unknown) => boolean) =>
  value === undefined || value === '' || valid(value);

/** generateName: a name's prefix, to which the API server appends 5 characters. */
const isGenerateName = (v: unknown) => typeof v === 'string' && v.length <= 248 && /^[a-z0-9][-a-z0-9.]*$/.test(v);

/**
 * The names every later step logs, labels metrics with or looks up: checked here, before any
 * use, as the API server validated them (DNS-1123, bounded). A value of another form or type did
 * not come from an API server.
 */
function namesProblem(request: Record<string, unknown>): void {
  const show = (v: unknown) => JSON.stringify(v)?.slice(0, 80);
  if (!nameOrEmpty(request.namespace, isNamespaceName))
    throw bad(`request.namespace ${show(request.namespace)} is not a namespace name (a DNS-1123 label)`);
  if (!nameOrEmpty(request.name, isObjectName))
    throw bad(`request.name ${show(request.name)} is not an object name (a DNS-1123 subdomain)`);
  const metadata = (request.object as { metadata?: unknown } | undefined)?.metadata;
  if (metadata === undefined || metadata === null) return;
  if (!isObject(metadata)) throw bad('request.object.metadata must be an object');
  if (!nameOrEmpty(metadata.namespace, isNamespaceName))
    throw bad(`metadata.namespace ${show(metadata.namespace)} is not a namespace name (a DNS-1123 label)`);
  if (!nameOrEmpty(metadata.name, isObjectName))
    throw bad(`metadata.name ${show(metadata.name)} is not an object name (a DNS-1123 subdomain)`);
  if (!nameOrEmpty(metadata.generateName, isGenerateName))
    throw bad(`metadata.generateName ${show(metadata.generateName)} is not a name prefix`);
}

export interface Decision {
  allowed: boolean;
  patch?: PatchOperation[];
  denial?: Denial;
  warnings?: string[];
  auditAnnotations?: Record<string, string>;
  /** Providers injected, for the decision's log line and metrics; not sent. */
  injected?: string[];
  /** Credential variables a container's own value shadows, for the metric; not sent. */
  shadowed?: { provider: string; variable: string }[];
  /** A Pod's injections, for the peers' metrics; not sent. */
  injections?: readonly Injection[];
  /** The patch as sent, once serialised (handler.ts's limitPatch does it, and measures it). */
  encodedPatch?: EncodedPatch;
}

interface EncodedPatch {
  base64: string;
  bytes: number;
}

export function encodePatch(patch: PatchOperation[]): EncodedPatch {
  const json = Buffer.from(JSON.stringify(patch));
  return { base64: json.toString('base64'), bytes: json.length };
}

/** What an allowed object may carry besides its patch. */
type Extras = Pick<Decision, 'warnings' | 'auditAnnotations' | 'injected' | 'injections' | 'shadowed'>;

// The verdicts, after controller-runtime's admission response.go: every Decision is made by one.

/** Admitted unchanged (warnings, if any, shown to the client). */
export function allowed(extras: Extras = {}): Decision {
  return { allowed: true, ...extras };
}

/** Admitted with this patch. */
export function patched(patch: PatchOperation[], extras: Extras = {}): Decision {
  return { allowed: true, patch, ...extras };
}

/** Refused, with the denial's status and message. */
export function denied(denial: Denial): Decision {
  return { allowed: false, denial };
}

const STATUS_REASONS: Record<Denial['status'], string> = {
  400: 'BadRequest',
  403: 'Forbidden',
  409: 'Conflict',
  500: 'InternalError',
  503: 'ServiceUnavailable',
};

/** The response, in the request's apiVersion, echoing its uid, serialised. */
export function reviewResponse(apiVersion: AdmissionReview['apiVersion'], uid: string, decision: Decision): string {
  const response: Record<string, unknown> = { uid, allowed: decision.allowed };
  if (decision.allowed && decision.patch && decision.patch.length > 0) {
    response.patchType = 'JSONPatch';
    response.patch = (decision.encodedPatch ?? encodePatch(decision.patch)).base64;
  }
  if (decision.denial) {
    response.status = {
      code: decision.denial.status,
      reason: STATUS_REASONS[decision.denial.status],
      message: decision.denial.message,
    };
  }
  if (decision.warnings && decision.warnings.length > 0) response.warnings = decision.warnings;
  if (decision.auditAnnotations && Object.keys(decision.auditAnnotations).length > 0) {
    response.auditAnnotations = decision.auditAnnotations;
  }
  return JSON.stringify({ apiVersion, kind: 'AdmissionReview', response });
}
