// One GET over http or https with explicit TLS material: the API server is read with the
// kubeconfig's credentials, the public issuer as a cloud reads it (no credentials at all).
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface TlsMaterial {
  ca?: string | Buffer | (string | Buffer)[];
  cert?: string | Buffer;
  key?: string | Buffer;
  servername?: string;
  rejectUnauthorized?: boolean;
  headers?: Record<string, string>;
  /** user:password (basic auth), from a kubeconfig. */
  auth?: string;
}

export interface HttpAnswer {
  status: number;
  body: string;
  contentType: string | undefined;
}

const MAX_BODY = 1 << 20;

/** Rejects with the network error (DNS, TLS, refused, timeout); HTTP errors are answers. */
export function httpGet(url: string, tls: TlsMaterial = {}, timeoutMs = 10_000): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const send = target.protocol === 'http:' ? httpRequest : httpsRequest;
    const req = send(
      target,
      {
        method: 'GET',
        // kube-apiserver answers 406 to a JWKS request that does not accept application/jwk-set+json.
        headers: { accept: 'application/json, application/jwk-set+json, */*;q=0.5', ...tls.headers },
        ca: tls.ca,
        cert: tls.cert,
        key: tls.key,
        servername: tls.servername,
        rejectUnauthorized: tls.rejectUnauthorized,
        auth: tls.auth,
        agent: false,
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_BODY) req.destroy(new Error(`answer larger than ${MAX_BODY} bytes`));
          else chunks.push(chunk);
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            contentType: res.headers['content-type'],
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** A network error as one line: its code and message (`ECONNREFUSED`, `CERT_HAS_EXPIRED`, ...). */
export function describeNetworkError(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e.code && !e.message.includes(e.code) ? `${e.code}: ${e.message}` : (e.message ?? String(err));
}
