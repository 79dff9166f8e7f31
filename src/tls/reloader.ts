import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import type { Logger } from 'pino';

export interface KeyPair {
  cert: string;
  key: string;
}

/** notAfter of a PEM certificate (the first of a chain), in seconds since the epoch. */
export function certificateNotAfter(certPem: string): number {
  return new X509Certificate(certPem).validToDate.getTime() / 1000;
}

/** Reads and checks a certificate/key pair: both parse and the key belongs to the certificate. */
export async function readKeyPair(certFile: string, keyFile: string): Promise<KeyPair> {
  const [cert, key] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
  const x509 = new X509Certificate(cert);
  if (!x509.checkPrivateKey(createPrivateKey(key))) {
    throw new Error(`the key in ${keyFile} does not belong to the certificate in ${certFile}`);
  }
  return { cert, key };
}

/**
 * Watches a certificate and key and calls `onChange` with each new valid pair. Secret mounts
 * swap a `..data` symlink, so the folders are watched, not the files; a half-written pair
 * (cert and key out of step) fails the check and is retried on the next event.
 */
export function watchKeyPair(
  certFile: string,
  keyFile: string,
  current: KeyPair,
  onChange: (pair: KeyPair) => void,
  log: Logger,
): () => void {
  let last = current;
  let timer: NodeJS.Timeout | undefined;
  const reload = () => {
    clearTimeout(timer);
    // Coalesce the burst of events one rotation makes.
    timer = setTimeout(async () => {
      try {
        const pair = await readKeyPair(certFile, keyFile);
        if (pair.cert === last.cert && pair.key === last.key) return;
        last = pair;
        onChange(pair);
        log.info({ certFile }, 'serving certificate reloaded');
      } catch (err) {
        log.warn({ certFile, err }, 'serving certificate not reloaded; keeping the current one');
      }
    }, 100);
  };
  const watchers: FSWatcher[] = [];
  for (const dir of new Set([dirname(certFile), dirname(keyFile)])) {
    const w = watch(dir, reload);
    w.on('error', (err) => log.warn({ dir, err }, 'cannot watch certificate folder'));
    watchers.push(w);
  }
  return () => {
    clearTimeout(timer);
    for (const w of watchers) w.close();
  };
}
