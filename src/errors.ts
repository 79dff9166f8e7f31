/**
 * Errors with a stable code (for logs, metrics and scripts) and a message a user can act on.
 * The code never changes once released; the message may be improved.
 */
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

/**
 * Why an object is refused at admission. `reason` is a short stable label (the metrics label
 * of denials); `status` the HTTP-like code the API server shows (400 invalid, 403 forbidden,
 * 409 conflict, 503 retry later).
 */
export interface Denial {
  reason: string;
  status: 400 | 403 | 409 | 503;
  message: string;
}

export function denial(reason: string, message: string, status: Denial['status'] = 400): Denial {
  return { reason, status, message };
}
