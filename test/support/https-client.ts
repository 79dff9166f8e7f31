import { request, type Agent } from 'node:https';

export interface HttpsResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json<T = any>(): T;
}

/** A minimal HTTPS client that trusts exactly the given CA. */
export function httpsRequest(
  url: string,
  options: {
    method?: string;
    ca: string;
    body?: string | Buffer;
    headers?: Record<string, string>;
    agent?: Agent;
    /** No answer by then: rejects (none by default). */
    timeoutMs?: number;
  },
): Promise<HttpsResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: options.method ?? 'GET', ca: options.ca, headers: options.headers, agent: options.agent },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: () => JSON.parse(body) });
        });
        res.on('error', reject);
      },
    );
    if (options.timeoutMs)
      req.setTimeout(options.timeoutMs, () => req.destroy(new Error(`no answer within ${options.timeoutMs} ms`)));
    req.on('error', reject);
    if (options.body !== undefined) req.end(options.body);
    else req.end();
  });
}
