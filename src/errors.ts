// Errors with a stable code (for logs, metrics and scripts) and a message a user can act on, and
// the denial catalog. One catalog of codes, after fastify's lib/errors.js: a code never changes
// once released; the message may be improved. Codes the HTTP server answers with carry their status.

export const ERROR_CODES = {
  // Answered by the admission server (the body: { code, message }).
  WIW_BAD_ADMISSION_REVIEW: { status: 400, means: 'the body is not an AdmissionReview the webhook can read' },
  WIW_BAD_REQUEST: {
    status: 400,
    means:
      'a request refused before its body is read as a review: a URL that is not valid, a body that does not match its Content-Length or is cut off',
  },
  WIW_CLIENT_CERTIFICATE_REQUIRED: {
    status: 401,
    means: '--client-ca-file is set and the caller sent no certificate it signed',
  },
  WIW_NOT_FOUND: { status: 404, means: 'no such route' },
  WIW_LENGTH_REQUIRED: { status: 411, means: 'a request without Content-Length' },
  WIW_REQUEST_TOO_LARGE: { status: 413, means: 'a request larger than --max-request-bytes' },
  WIW_UNSUPPORTED_MEDIA_TYPE: { status: 415, means: 'a body that is not JSON' },
  WIW_BUSY: {
    status: 503,
    means:
      'more bytes of reviews in progress than --max-inflight-request-bytes, or more reviews on one HTTP/2 connection than --max-concurrent-streams; retry',
  },
  WIW_CLOSING: {
    status: 503,
    means:
      'a request on a connection still open as the replica shuts down, after its drain; retry (kube-apiserver does, on the Retry-After)',
  },
  WIW_INTERNAL: { status: 500, means: 'a defect: the webhook could not answer' },
  // Raised inside the webhook and its commands.
  WIW_INVALID_CONFIG: { means: 'a flag or environment variable with an invalid value (start-up)' },
  WIW_BAD_USAGE: { means: 'a command given the wrong arguments' },
  WIW_BAD_INPUT: { means: 'a file or value a command cannot read' },
  WIW_BAD_POLICY_FILE: { means: 'a WorkloadIdentityPolicy file that cannot be read' },
  WIW_ISSUER_UNKNOWN: { means: "the cluster's issuer could not be read" },
  WIW_ISSUER_DOCUMENT: { means: 'a discovery document or JWKS that is not what OpenID Connect says' },
  WIW_CERT_CONFLICT: { means: 'another replica changed the certificate Secret first; retried' },
  WIW_SERVICEACCOUNT_UNAVAILABLE: { means: 'a ServiceAccount neither cached nor readable now' },
  WIW_NAMESPACE_UNAVAILABLE: { means: 'a Namespace neither cached nor readable now' },
} as const satisfies Record<string, { status?: number; means: string }>;

type ErrorCode = keyof typeof ERROR_CODES;
/** The codes the admission server answers with. */
export type HttpErrorCode = {
  [K in ErrorCode]: (typeof ERROR_CODES)[K] extends { status: number } ? K : never;
}[ErrorCode];

/** An HTTP error answer: the catalog's status and a body naming the code. */
export function httpError(
  code: HttpErrorCode,
  message: string,
): { status: number; body: { code: string; message: string } } {
  return { status: ERROR_CODES[code].status, body: { code, message } };
}

export class WebhookError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'WebhookError';
    this.code = code;
  }
}

/**
 * A command given the wrong arguments: the CLI prints the message and where to read more (the
 * command's help, else the list of commands), and exits 2.
 */
export class UsageError extends WebhookError {
  /** The command whose help the message points to. */
  readonly command?: string;
  constructor(message: string, command?: string) {
    super('WIW_BAD_USAGE', message);
    this.name = 'UsageError';
    this.command = command;
  }
}

/**
 * The message of a value caught: an error's own, else the value as text. `catch` binds unknown;
 * this is the one place that looks inside it.
 */
export function errorMessage(err: unknown): string {
  return typeof err === 'object' && err !== null && 'message' in err && typeof err.message === 'string'
    ? err.message
    : String(err);
}

/** What a failed read or write of a file says: the system's code (ENOENT, EACCES) when it has one, else the message. */
export function ioProblem(err: unknown): string {
  const code = typeof err === 'object' && err !== null && 'code' in err ? err.code : undefined;
  return typeof code === 'string' ? code : errorMessage(err);
}

/** A configuration flag or environment variable with an invalid value; raised at start-up. */
export class ConfigError extends WebhookError {
  constructor(message: string) {
    super('WIW_INVALID_CONFIG', message);
    this.name = 'ConfigError';
  }
}

// Why an object is refused at admission: every reason the webhook gives, with the HTTP-like
// status the API server shows (400 invalid, 403 forbidden, 409 conflict, 500 a defect of the
// webhook, 503 retry later). The reason is a metrics label, so the set is closed: a new reason
// is added here, nowhere else.
const DENIAL_STATUS = {
  ConflictingAnnotations: 400,
  ConflictingLabels: 400,
  ImmutableAccount: 400,
  ImmutableProvider: 400,
  InvalidAnnotation: 400,
  InvalidClientId: 400,
  InvalidConfig: 400,
  InvalidProxyPort: 400,
  InvalidRoleArn: 400,
  InvalidServiceAccountEmail: 400,
  InvalidServiceAccountReference: 400,
  InvalidTenantId: 400,
  InvalidTokenExpiration: 400,
  InvalidTokenPath: 400,
  InvalidWorkloadIdentityProvider: 400,
  MalformedObject: 400,
  MissingConfig: 400,
  MissingConfigField: 400,
  MissingServiceAccount: 400,
  ProxyWithHostNetwork: 400,
  TooLarge: 400,
  UnknownProvider: 400,
  NamespaceNotServed: 403,
  NamespaceUnavailable: 403,
  PolicyDenied: 403,
  PolicyError: 403,
  PolicyUnavailable: 403,
  ReferenceNotGranted: 403,
  TokenUrlNotAllowed: 403,
  UntrustedIdentityProvider: 403,
  Conflict: 409,
  InternalError: 500,
  ServiceAccountUnavailable: 503,
} as const satisfies Record<string, 400 | 403 | 409 | 500 | 503>;

type DenialReason = keyof typeof DENIAL_STATUS;

export interface Denial {
  reason: DenialReason;
  status: (typeof DENIAL_STATUS)[DenialReason];
  message: string;
}

export function denial(reason: DenialReason, message: string): Denial {
  return { reason, status: DENIAL_STATUS[reason], message };
}

/** Several refusals as one: the first one's reason, every message. */
export function mergeDenials(denials: readonly Denial[]): Denial {
  if (denials.length === 1) return denials[0];
  return denial(denials[0].reason, denials.map((d) => d.message).join('; '));
}

/** The one way to tell a denial from a value: every result type of the webhook is `T | Denial`. */
export function isDenial(value: unknown): value is Denial {
  return (
    typeof value === 'object' &&
    value !== null &&
    'reason' in value &&
    Object.hasOwn(DENIAL_STATUS, (value as Denial).reason)
  );
}
