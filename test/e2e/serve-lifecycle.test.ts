// `serve` as a process: certificates reloaded from files without a restart, and a graceful
// SIGTERM (not ready, still serving for the drain period, then a clean exit).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { rename, writeFile, mkdir } from 'node:fs/promises';
import { Agent } from 'node:https';
import { connect } from 'node:tls';
import { join } from 'node:path';
import { generateCertificates } from '../../src/tls/self-signed.ts';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { httpsRequest } from '../support/https-client.ts';
import { startTcpProxy } from '../support/tcp-proxy.ts';
import { startWebhook, until } from '../support/webhook.ts';

let cp: ControlPlane;
before(async () => {
  cp = await startControlPlane({ name: 'lifecycle' });
});
after(() => cp?.stop());

function servedCertificate(port: number, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', ca, servername: 'localhost' }, () => {
      resolve(new X509Certificate(socket.getPeerCertificate(true).raw).fingerprint256);
      socket.end();
    });
    socket.on('error', reject);
  });
}

/**
 * A Service stand-in: round-robin TCP to the backends whose /readyz answers 200, as endpoints
 * follow readiness. Connections already open stay where they are, as with kube-proxy.
 */
async function readinessBalancer(backends: { port: number; url: string }[], ca: string) {
  const ready = new Set<number>();
  const poll = setInterval(() => {
    for (const b of backends) {
      httpsRequest(`${b.url}/readyz`, { ca }).then(
        (res) => (res.status === 200 ? ready.add(b.port) : ready.delete(b.port)),
        () => ready.delete(b.port),
      );
    }
  }, 100);
  let next = 0;
  const proxy = await startTcpProxy(() => {
    const ports = [...ready];
    return ports.length ? ports[next++ % ports.length] : undefined;
  });
  await until('both replicas to be ready behind the balancer', () => ready.size === backends.length || undefined);
  return {
    port: proxy.port,
    close() {
      clearInterval(poll);
      proxy.close();
    },
  };
}

const review = {
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: {
    uid: 'u1',
    kind: { group: '', version: 'v1', kind: 'Pod' },
    namespace: 'default',
    operation: 'CREATE',
    object: { metadata: { name: 'x' }, spec: { containers: [{ name: 'c' }] } },
  },
};

describe('serve', () => {
  test('reloads a rotated certificate without a restart, as a Secret mount swaps it', async () => {
    const first = await generateCertificates(['localhost', '127.0.0.1']);
    const dir = join(cp.dir, 'tls');
    await mkdir(join(dir, 'v1'), { recursive: true });
    await writeFile(join(dir, 'v1', 'tls.crt'), first.certPem);
    await writeFile(join(dir, 'v1', 'tls.key'), first.keyPem);
    const certFile = join(dir, 'tls.crt');
    const keyFile = join(dir, 'tls.key');
    await writeFile(certFile, first.certPem);
    await writeFile(keyFile, first.keyPem);
    const wh = await startWebhook(cp, [], { tls: { certFile, keyFile, caPem: first.caPem } });
    try {
      const before = await servedCertificate(wh.port, first.caPem);
      assert.equal(before, new X509Certificate(first.certPem).fingerprint256);

      const second = await generateCertificates(['localhost', '127.0.0.1']);
      // Key first, then certificate, each by an atomic rename: a reader may see them out of step.
      await writeFile(`${keyFile}.new`, second.keyPem);
      await rename(`${keyFile}.new`, keyFile);
      await writeFile(`${certFile}.new`, second.certPem);
      await rename(`${certFile}.new`, certFile);
      const expected = new X509Certificate(second.certPem).fingerprint256;
      await until(
        'the new certificate to be served',
        async () => (await servedCertificate(wh.port, second.caPem)) === expected || undefined,
      );
      const res = await httpsRequest(`${wh.url}/mutate`, {
        method: 'POST',
        ca: second.caPem,
        body: JSON.stringify(review),
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(res.json().response.allowed, true);
      assert.ok(wh.logs().some((l) => l.msg === 'serving certificate reloaded'));
      assert.equal(wh.process.exitStatus(), null);
    } finally {
      await wh.stop();
    }
  });

  test('on SIGTERM it reports not ready, keeps answering for the drain period, then exits 0', async () => {
    const wh = await startWebhook(cp, ['--drain-seconds', '3']);
    process.kill(wh.process.pid, 'SIGTERM');
    await until(
      'readyz to fail',
      async () => (await httpsRequest(`${wh.url}/readyz`, { ca: wh.caPem })).status === 503 || undefined,
    );
    const res = await httpsRequest(`${wh.url}/mutate`, {
      method: 'POST',
      ca: wh.caPem,
      body: JSON.stringify(review),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(res.status, 200);
    assert.equal(res.json().response.uid, 'u1');
    // Clients pooling connections to this replica must dial again (and reach a ready one).
    assert.equal(res.headers.connection, 'close');
    assert.equal(await wh.process.exited, 0);
    assert.ok(wh.logs().some((l) => l.msg === 'stopped'));
  });

  test('drain under keep-alive load behind a Service: clients are told to go elsewhere and no request fails', async () => {
    const certs = await generateCertificates(['localhost', '127.0.0.1']);
    const dir = join(cp.dir, 'drain-tls');
    await mkdir(dir, { recursive: true });
    const certFile = join(dir, 'tls.crt');
    const keyFile = join(dir, 'tls.key');
    await writeFile(certFile, certs.certPem);
    await writeFile(keyFile, certs.keyPem);
    const tls = { certFile, keyFile, caPem: certs.caPem };
    const [a, b] = await Promise.all([
      startWebhook(cp, ['--drain-seconds', '2'], { tls }),
      startWebhook(cp, ['--drain-seconds', '2'], { tls }),
    ]);
    const service = await readinessBalancer(
      [a, b].map((w) => ({ port: w.port, url: w.url })),
      certs.caPem,
    );
    const agent = new Agent({ keepAlive: true, maxSockets: 8, ca: certs.caPem });
    let ok = 0;
    let closes = 0;
    const failures: string[] = [];
    let stop = false;
    const worker = async () => {
      while (!stop) {
        try {
          const res = await httpsRequest(`https://127.0.0.1:${service.port}/mutate`, {
            method: 'POST',
            ca: certs.caPem,
            agent,
            body: JSON.stringify(review),
            headers: { 'content-type': 'application/json', host: 'localhost' },
          });
          if (res.status === 200) ok++;
          else failures.push(`HTTP ${res.status}`);
          if (res.headers.connection === 'close') closes++;
        } catch (err) {
          failures.push((err as Error).message);
        }
      }
    };
    try {
      const workers = Array.from({ length: 8 }, worker);
      await until('load to flow through both replicas', () => ok > 200 || undefined);
      process.kill(a.process.pid, 'SIGTERM');
      assert.equal(await a.process.exited, 0);
      const afterExit = ok;
      await until('load to go on after the replica left', () => ok > afterExit + 200 || undefined);
      stop = true;
      await Promise.all(workers);
      assert.deepEqual(failures, []);
      assert.ok(closes > 0, 'answers during the drain carry Connection: close');
    } finally {
      stop = true;
      agent.destroy();
      service.close();
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  test('a bad flag value stops start-up with a message naming the flag', async () => {
    await assert.rejects(
      startWebhook(cp, ['--azure-cloud', 'Mars']),
      /--azure-cloud="Mars" must be one of: AzurePublicCloud, AzureUSGovernmentCloud, AzureChinaCloud/,
    );
  });
});
