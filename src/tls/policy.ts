// What the admission server accepts in TLS: version floor and TLS 1.2 cipher suites. Node's own
// default list still offers static-RSA key exchange and CBC with SHA-1; the default here keeps
// only forward-secret AEAD suites (the Mozilla "intermediate" set), which Go's TLS client in
// kube-apiserver prefers anyway. Names are the IANA ones the peers' --tls-cipher-suites take.
import { ConfigError } from '../errors.ts';

/** IANA name (as Go and the peers spell it) -> OpenSSL name. Only suites worth offering. */
const TLS12_SUITES: Record<string, string> = {
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: 'ECDHE-ECDSA-AES128-GCM-SHA256',
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: 'ECDHE-RSA-AES128-GCM-SHA256',
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: 'ECDHE-ECDSA-AES256-GCM-SHA384',
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: 'ECDHE-RSA-AES256-GCM-SHA384',
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-ECDSA-CHACHA20-POLY1305',
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-RSA-CHACHA20-POLY1305',
};
// Go's spelling without the hash suffix.
const ALIASES: Record<string, string> = {
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305: 'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256',
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305: 'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256',
};
/** TLS 1.3 suites are all AEAD and forward-secret; listed so a TLS 1.3 handshake still works. */
const TLS13_SUITES = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'];

export const DEFAULT_TLS12_SUITES = Object.keys(TLS12_SUITES);

export type TlsVersion = 'TLSv1.2' | 'TLSv1.3';

export interface TlsPolicy {
  minVersion: TlsVersion;
  /** OpenSSL cipher string for Node's `ciphers` option. */
  ciphers: string;
}

/** "1.2", "1.3", "VersionTLS12", "VersionTLS13", "TLSv1.2" (the spellings of the peers and of Go). */
export function parseTlsVersion(raw: string, flag: string): TlsVersion {
  const v = raw
    .trim()
    .toLowerCase()
    .replace(/^versiontls1?/, '1.')
    .replace(/^tlsv/, '');
  if (v === '1.2' || v === '1.12') return 'TLSv1.2';
  if (v === '1.3' || v === '1.13') return 'TLSv1.3';
  throw new ConfigError(
    `--${flag}="${raw}" must be 1.2 or 1.3 (also VersionTLS12, VersionTLS13); older versions are not offered`,
  );
}

/** Comma-separated IANA names; each must be a forward-secret AEAD suite. */
export function parseCipherSuites(raw: string, flag: string): string[] {
  const names = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (names.length === 0) throw new ConfigError(`--${flag} is empty; leave it unset for the default list`);
  return names.map((name) => {
    const canonical = ALIASES[name] ?? name;
    if (TLS12_SUITES[canonical]) return canonical;
    if (TLS13_SUITES.includes(name)) {
      throw new ConfigError(
        `--${flag}: ${name} is a TLS 1.3 suite; TLS 1.3 suites are always enabled and not configurable`,
      );
    }
    throw new ConfigError(
      `--${flag}: ${name} is not offered (only forward-secret AEAD suites are): choose from ${DEFAULT_TLS12_SUITES.join(', ')}`,
    );
  });
}

export function tlsPolicy(minVersion: TlsVersion, suites: readonly string[] = DEFAULT_TLS12_SUITES): TlsPolicy {
  return { minVersion, ciphers: [...TLS13_SUITES, ...suites.map((s) => TLS12_SUITES[s])].join(':') };
}
