// Raw HTTPS calls with a client certificate (readiness probes, discovery documents).
import { request } from 'node:https';

export interface TlsClient {
  server: string;
  caPem: string;
  clientCertPem: string;
  clientKeyPem: string;
}

export interface RawResponse {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

export function httpsRequest(
  client: TlsClient,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = 10_000,
): Promise<RawResponse> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, client.server),
      {
        method,
        ca: client.caPem,
        cert: client.clientCertPem,
        key: client.clientKeyPem,
        agent: false, // no keep-alive socket left holding the event loop open
        timeout: timeoutMs,
        headers: { accept: 'application/json, */*', ...(payload && { 'content-type': 'application/json' }) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}
