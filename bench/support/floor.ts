// The floor of bench:peers: a bare Node HTTPS server that only reads an AdmissionReview, parses
// it and answers it allowed with no patch. Same certificate and TLS policy as `serve` (its minimum
// version and cipher list, HTTP/2 offered beside HTTP/1.1 as serve's default), same Node and
// pinning; no framework, limits, cache, logging or metrics. What serve costs beyond this is its
// own work; no Node webhook answers for less. With CORE_FILE, the same server answers with serve's
// admission core instead (support/floor-core.ts), loaded only then.
//
//   node bench/support/floor.ts CERT_FILE KEY_FILE [HOST [CORE_FILE]]
//   (prints {"msg":"listening","port":N}; HOST 127.0.0.1 unless given)
import { readFileSync } from 'node:fs';
import { createSecureServer, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tlsPolicy } from '../../src/tls/policy.ts';

const [certFile, keyFile, host = '127.0.0.1', coreFile] = process.argv.slice(2);
const policy = tlsPolicy('TLSv1.2');

/** The answer's body: the review allowed as it is. */
function allow(body: Buffer): string {
  const review = JSON.parse(body.toString('utf8'));
  return JSON.stringify({
    apiVersion: review.apiVersion,
    kind: 'AdmissionReview',
    response: { uid: review.request.uid, allowed: true },
  });
}

const answerOf: (body: Buffer) => string | Promise<string> = coreFile
  ? (await import('./floor-core.ts')).coreAnswer(JSON.parse(readFileSync(coreFile, 'utf8')))
  : allow;

function answer(req: Http2ServerRequest, res: Http2ServerResponse) {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  const send = (body: string) =>
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
  const refuse = () => res.writeHead(400).end();
  req.on('end', () => {
    let out: string | Promise<string>;
    try {
      out = answerOf(Buffer.concat(chunks));
    } catch {
      return refuse();
    }
    if (typeof out === 'string') send(out);
    else out.then(send, refuse);
  });
}

const server = createSecureServer(
  {
    cert: readFileSync(certFile),
    key: readFileSync(keyFile),
    minVersion: policy.minVersion,
    ciphers: policy.ciphers,
    honorCipherOrder: true,
    allowHTTP1: true,
  },
  answer,
);
server.listen(0, host, () =>
  console.log(JSON.stringify({ msg: 'listening', port: (server.address() as AddressInfo).port })),
);
process.on('SIGTERM', () => process.exit(0));
