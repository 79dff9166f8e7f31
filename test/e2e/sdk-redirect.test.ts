// The containment the SDK proof relies on: inside an SDK child process the cloud host names
// resolve to the stand-in, every other name fails to resolve, and no connection leaves loopback.
// The probes run in a fresh network namespace (unshare --net), so even a broken guard sends
// nothing anywhere; the guard's own message tells it apart from the kernel's refusal.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { promisify } from 'node:util';
import { sdkPython } from '../sdk/sdk-process.ts';

const run = promisify(execFile);
const HERE = join(import.meta.dirname, '../sdk');
const env = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  WIW_SDK_STANDIN_ADDRESS: '127.1.2.3',
  WIW_SDK_STANDIN_HOSTS: 'sts.amazonaws.com,login.microsoftonline.com',
};

test('Node.js: stand-in names resolve to the stand-in, others not at all, and nothing connects off loopback', async () => {
  const probe = `
    import dns from 'node:dns/promises';
    import http from 'node:http';
    const out = {};
    out.standIn = (await dns.lookup('sts.amazonaws.com')).address;
    out.other = await dns.lookup('example.com').then(() => 'resolved', (e) => e.code);
    out.metadata = await new Promise((resolve) => {
      http.get('http://169.254.169.254/latest/meta-data/', () => resolve('connected')).on('error', (e) => resolve(e.message));
    });
    out.fetch = await fetch('http://169.254.169.254/').then(() => 'connected', (e) => e.cause?.message ?? e.message);
    console.log(JSON.stringify(out));
  `;
  const { stdout, stderr } = await run(
    'unshare',
    ['--net', process.execPath, '--import', join(HERE, 'node/redirect.ts'), '--input-type=module', '-e', probe],
    { env },
  );
  const out = JSON.parse(stdout);
  assert.equal(out.standIn, '127.1.2.3');
  assert.equal(out.other, 'ENOTFOUND');
  assert.match(out.metadata, /ENETUNREACH 169\.254\.169\.254:80 \(blocked off loopback\)/);
  assert.match(out.fetch, /blocked off loopback/);
  assert.match(stderr, /redirect: refused to resolve example\.com/);
});

test('Python: stand-in names resolve to the stand-in, others not at all, and nothing connects off loopback', async () => {
  const probe = `
import json, socket
out = {"standIn": socket.getaddrinfo("login.microsoftonline.com", 443)[0][4][0]}
try:
    socket.getaddrinfo("example.com", 443)
    out["other"] = "resolved"
except socket.gaierror as e:
    out["other"] = e.errno == socket.EAI_NONAME
try:
    socket.create_connection(("169.254.169.254", 80), timeout=5)
    out["metadata"] = "connected"
except OSError as e:
    out["metadata"] = str(e)
print(json.dumps(out))
`;
  const { stdout } = await run('unshare', ['--net', sdkPython(), '-c', probe], {
    env: { ...env, PYTHONPATH: join(HERE, 'python'), PYTHONDONTWRITEBYTECODE: '1' },
  });
  const out = JSON.parse(stdout);
  assert.equal(out.standIn, '127.1.2.3');
  assert.equal(out.other, true);
  assert.match(out.metadata, /Network is unreachable \(blocked off loopback\): 169\.254\.169\.254/);
});
