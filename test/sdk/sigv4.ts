// AWS Signature Version 4 as a service checks it (docs.aws.amazon.com/IAM/latest/UserGuide/
// reference_sigv-create-signed-request.html): the canonical request rebuilt from the request
// received and the headers its Authorization names, the string to sign over the credential
// scope, and the signature recomputed with the secret the stand-in issued for the access key.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { StandInRequest } from './standin-server.ts';

export interface SignedBy {
  accessKeyId: string;
  /** `<yyyymmdd>/<region>/<service>/aws4_request`. */
  scope: string;
  region: string;
  service: string;
  amzDate: string;
}

const AUTHORIZATION =
  /^AWS4-HMAC-SHA256 Credential=([^/,\s]+)\/([^,\s]+), ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/;

const sha256 = (data: string) => createHash('sha256').update(data, 'utf8').digest('hex');
const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data, 'utf8').digest();

/** The Authorization header read, or why it is no SigV4 signature (STS: IncompleteSignature). */
export function readAuthorization(
  req: StandInRequest,
): { signedBy: SignedBy; signedHeaders: string[]; signature: string } | string {
  const header = req.headers.authorization;
  const m = typeof header === 'string' ? AUTHORIZATION.exec(header) : null;
  if (!m) return `Authorization header requires a SigV4 signature (got ${JSON.stringify(header ?? null)})`;
  const [, accessKeyId, scope, headers, signature] = m;
  const [date, region, service, terminal] = scope.split('/');
  const amzDate = req.headers['x-amz-date'];
  if (typeof amzDate !== 'string' || !/^\d{8}T\d{6}Z$/.test(amzDate) || !amzDate.startsWith(date ?? '-'))
    return `X-Amz-Date ${JSON.stringify(amzDate ?? null)} is not the date of the credential scope ${scope}`;
  if (!region || service !== 'sts' || terminal !== 'aws4_request')
    return `Credential should be scoped to a valid region and service sts, not ${scope}`;
  const signedHeaders = headers.split(';');
  if (!signedHeaders.includes('host') || !signedHeaders.includes('x-amz-date'))
    return `SignedHeaders ${headers} must include host and x-amz-date`;
  return { signedBy: { accessKeyId, scope, region, service, amzDate }, signedHeaders, signature };
}

/** Whether the signature is the one `secret` gives this request. */
export function signatureMatches(
  req: StandInRequest,
  auth: { signedBy: SignedBy; signedHeaders: string[]; signature: string },
  secret: string,
): boolean {
  const canonicalHeaders = auth.signedHeaders
    .map((name) => {
      const value = name === 'host' ? (req.headers.host ?? '') : req.headers[name];
      return `${name}:${[value ?? ''].flat().join(',').trim().replace(/\s+/g, ' ')}\n`;
    })
    .join('');
  const query = [...req.query]
    .map(([k, v]) => [encodeURIComponent(k), encodeURIComponent(v)])
    .sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : 1) : a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const canonical = [
    req.method,
    req.path,
    query,
    canonicalHeaders,
    auth.signedHeaders.join(';'),
    sha256(req.body),
  ].join('\n');
  const { amzDate, scope } = auth.signedBy;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonical)].join('\n');
  const [date, region, service] = scope.split('/');
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
  const expected = hmac(key, toSign);
  return timingSafeEqual(expected, Buffer.from(auth.signature, 'hex'));
}
