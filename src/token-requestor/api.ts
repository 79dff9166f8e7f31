// The requestor's side of the API server: the calls it makes (the real ones in ./kube-api.ts,
// a recording fake in the unit tests) and what it reads out of a failed one.
import { errorMessage } from '../errors.ts';
import type { ServiceAccountView } from '../kube/types.ts';
import type { TrackedSecret } from './secret-informer.ts';

/** The Kubernetes calls the requestor makes; the real ones are in ./kube-api.ts. */
export interface RequestorApi {
  /** undefined when the ServiceAccount does not exist. */
  readServiceAccount(namespace: string, name: string): Promise<ServiceAccountView | undefined>;
  /** TokenRequest; `boundSecret` binds the token to the Secret, so deleting the Secret revokes it. */
  requestToken(request: {
    namespace: string;
    name: string;
    audience: string;
    expirationSeconds: number;
    boundSecret?: { name: string; uid: string };
  }): Promise<string>;
  /** Writes `token` (null: removes it) if the Secret is still at `resourceVersion`; returns the new resourceVersion. */
  writeToken(
    secret: { namespace: string; name: string; resourceVersion: string },
    token: string | null,
    clearRenewAnnotation: boolean,
  ): Promise<string>;
  /** A Warning event on the Secret, where `kubectl describe secret` shows it. */
  warn(secret: TrackedSecret, reason: string, message: string): Promise<void>;
}

/** The API server's message (for a webhook denial, the webhook's), never a token. */
export function apiMessage(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  let parsed: unknown = body;
  if (typeof body === 'string') {
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = undefined;
    }
  }
  const message = (parsed as { message?: unknown } | undefined)?.message;
  if (typeof message === 'string') return message;
  return errorMessage(err);
}
