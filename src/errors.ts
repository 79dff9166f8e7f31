// Errors with a stable code (for logs, metrics and scripts) and a message a user can act on.
// The code never changes once released; the message may be improved.

export class WebhookError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'WebhookError';
    this.code = code;
  }
}

/** A configuration flag or environment variable with an invalid value; raised at start-up. */
export class ConfigError extends WebhookError {
  constructor(message: string) {
    super('WIW_INVALID_CONFIG', message);
    this.name = 'ConfigError';
  }
}

// Why an object is refused at admission: every reason the webhook gives, with the HTTP-like
// status the API server shows (400 invalid, 403 forbidden, 409 conflict, 503 retry later). The
// reason is a metrics label, so the set is closed: a new reason is added here, nowhere else.
export const DENIAL_STATUS = {
  ConflictingAnnotations: 400,
  ConflictingLabels: 400,
  ImmutableAccount: 400,
  ImmutableProvider: 400,
  InternalError: 400,
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
  ServiceAccountUnavailable: 503,
} as const satisfies Record<string, 400 | 403 | 409 | 503>;

export type DenialReason = keyof typeof DENIAL_STATUS;

export interface Denial {
  reason: DenialReason;
  status: (typeof DENIAL_STATUS)[DenialReason];
  message: string;
}

export function denial(reason: DenialReason, message: string): Denial {
  return { reason, status: DENIAL_STATUS[reason], message };
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
