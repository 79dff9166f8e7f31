// The TokenRequest doctor makes for a ServiceAccount (the token the kubelet would mount), and the
// Kubernetes client's errors in one line for a finding.
import type { CoreV1Api } from '@kubernetes/client-node';

export async function requestToken(
  core: CoreV1Api,
  namespace: string,
  name: string,
  audience: string,
  expirationSeconds: number,
): Promise<string> {
  const res = await core.createNamespacedServiceAccountToken({
    namespace,
    name,
    body: { spec: { audiences: [audience], expirationSeconds } },
  });
  if (!res.status?.token) throw new Error('the TokenRequest returned no token');
  return res.status.token;
}

export function kubeError(err: unknown): string {
  const e = err as { code?: number; body?: unknown; message?: string };
  if (typeof e.code === 'number') {
    const body =
      typeof e.body === 'string' ? safeMessage(e.body) : (e.body as { message?: string } | undefined)?.message;
    return `HTTP ${e.code}${body ? `: ${body}` : ''}`;
  }
  return e.message ?? String(err);
}

function safeMessage(body: string): string | undefined {
  try {
    return (JSON.parse(body) as { message?: string }).message;
  } catch {
    return body.slice(0, 200);
  }
}
