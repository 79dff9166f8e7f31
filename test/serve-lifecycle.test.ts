// `serve` as a process: certificates reloaded from files without a restart, and a graceful
// SIGTERM (not ready, still serving for the drain period, then a clean exit).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { rename, writeFile, mkdir } from 'node:fs/promises';
import { connect } from 'node:tls';
import { join } from 'node:path';
import { generateCertificates } from '../src/tls/self-signed.ts';
import { startControlPlane, type ControlPlane } from './harness/control-plane.ts';
import { httpsRequest } from './https-client.ts';
import { startWebhook, until } from './support/webhook.ts';

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

const review = {
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: { uid: 'u1', kind: { group: '', version: 'v1', kind: 'Pod' }, namespace: 'default', operation: 'CREATE', object: { metadata: { name: 'x' }, spec: { containers: [{ name: 'c' }] } } },
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
      await until('the new certificate to be served', async () => (await servedCertificate(wh.port, second.caPem)) === expected || undefined);
      const res = await httpsRequest(`${wh.url}/mutate`, { method: 'POST', ca: second.caPem, body: JSON.stringify(review), headers: { 'content-type': 'application/json' } });
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
    await until('readyz to fail', async () => (await httpsRequest(`${wh.url}/readyz`, { ca: wh.caPem })).status === 503 || undefined);
    const res = await httpsRequest(`${wh.url}/mutate`, { method: 'POST', ca: wh.caPem, body: JSON.stringify(review), headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 200);
    assert.equal(res.json().response.uid, 'u1');
    // Clients pooling connections to this replica must dial again (and reach a ready one).
    assert.equal(res.headers.connection, 'close');
    assert.equal(await wh.process.exited, 0);
    assert.ok(wh.logs().some((l) => l.msg === 'stopped'));
  });

  test('a bad flag value stops start-up with a message naming the flag', async () => {
    await assert.rejects(startWebhook(cp, ['--azure-cloud', 'Mars']), /--azure-cloud="Mars" must be one of: AzurePublicCloud, AzureUSGovernmentCloud, AzureChinaCloud/);
  });
});
