// A real OCI registry on the loopback: distribution's `registry` (scripts/provide-registry.sh),
// plain HTTP, storage in a temporary folder. The release test pushes to it and a node's containerd
// pulls from it; its access log tells who fetched what.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePorts } from './control-plane.ts';
import { scriptVars } from './node-images.ts';
import { startProcess } from './processes.ts';

export const MEDIA = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
} as const;

export interface AccessLogEntry {
  method: string;
  path: string;
  status: number;
  userAgent: string;
}

export interface LocalRegistry {
  /** host:port, what image references and `helm push oci://` name. */
  host: string;
  /** A manifest or index by tag or digest, parsed, with the digest the registry reports. */
  manifest(repository: string, reference: string): Promise<{ digest: string; mediaType: string; body: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** A blob, parsed as JSON (configs). */
  blobJson(repository: string, digest: string): Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** The requests the registry answered so far. */
  accessLog(): AccessLogEntry[];
  stop(): Promise<void>;
}

export async function startRegistry(): Promise<LocalRegistry> {
  const { REGISTRY: binary } = await scriptVars('scripts/provide-registry.sh');
  const dir = await mkdtemp(join(tmpdir(), 'wiw-registry-'));
  const [port] = await freePorts(1);
  const host = `127.0.0.1:${port}`;
  await writeFile(
    join(dir, 'config.yml'),
    [
      'version: 0.1',
      'log:',
      '  level: info',
      '  accesslog:',
      '    disabled: false',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${join(dir, 'data')}`,
      'http:',
      `  addr: ${host}`,
      `  secret: ${randomBytes(16).toString('hex')}`,
      '',
    ].join('\n'),
  );
  const logPath = join(dir, 'registry.log');
  const proc = startProcess('registry', binary, ['serve', join(dir, 'config.yml')], logPath);
  const stop = async (): Promise<void> => {
    await proc.stop();
    await rm(dir, { recursive: true, force: true });
  };
  const base = `http://${host}/v2`;
  try {
    for (let i = 0; ; i++) {
      if (proc.exitStatus() !== null) throw new Error(`the registry exited:\n${proc.logTail(20)}`);
      const ok = await fetch(`${base}/`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (i > 200) throw new Error(`the registry did not answer within 50 s:\n${proc.logTail(20)}`);
      await sleep(250);
    }
  } catch (err) {
    await stop();
    throw err;
  }

  const get = async (path: string, accept?: string): Promise<Response> => {
    const res = await fetch(`${base}/${path}`, { headers: accept ? { accept } : {} });
    if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
    return res;
  };
  return {
    host,
    async manifest(repository, reference) {
      const res = await get(`${repository}/manifests/${reference}`, Object.values(MEDIA).join(', '));
      return {
        digest: res.headers.get('docker-content-digest') ?? '',
        mediaType: res.headers.get('content-type') ?? '',
        body: await res.json(),
      };
    },
    async blobJson(repository, digest) {
      return (await get(`${repository}/blobs/${digest}`)).json();
    },
    accessLog() {
      // Combined log format: HOST - - [DATE] "METHOD PATH PROTO" STATUS SIZE "REFERER" "AGENT"
      const entries: AccessLogEntry[] = [];
      for (const line of readFileSync(logPath, 'utf8').split('\n')) {
        const m = /\] "(\w+) (\S+) [^"]*" (\d{3}) \S+ "[^"]*" "([^"]*)"/.exec(line);
        if (m) entries.push({ method: m[1], path: m[2], status: Number(m[3]), userAgent: m[4] });
      }
      return entries;
    },
    stop,
  };
}
