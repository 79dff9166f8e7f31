// `issuer publish`: the two files a self-hosted issuer serves, laid out for any static host
// (a bucket, a web server), and the kube-apiserver flags that point tokens at them.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ioProblem, WebhookError } from '../errors.ts';
import {
  discoveryDocument,
  DISCOVERY_PATH,
  issuerProblem,
  JWKS_PATH,
  type DiscoveryDocument,
  type Jwks,
} from './discovery.ts';

interface Publication {
  discovery: DiscoveryDocument;
  jwks: Jwks;
  /** Files written, relative to the folder. */
  files: string[];
  /** What kube-apiserver needs so its tokens name this issuer and its discovery this JWKS. */
  apiServerFlags: string[];
}

/** An https issuer URL with no query, fragment or trailing slash: what every cloud accepts alike. */
function checkIssuerUrl(issuer: string): URL {
  const url = URL.parse(issuer);
  if (!url) throw new WebhookError('WIW_BAD_INPUT', `--issuer "${issuer}" is not a URL; expected https://host[/path]`);
  if (url.protocol !== 'https:')
    throw new WebhookError(
      'WIW_BAD_INPUT',
      `--issuer "${issuer}" must use https: the clouds fetch discovery over https only`,
    );
  if (url.search || url.hash)
    throw new WebhookError('WIW_BAD_INPUT', `--issuer "${issuer}" must have no query or fragment`);
  const form = issuerProblem(issuer);
  if (form) throw new WebhookError('WIW_BAD_INPUT', `--issuer ${form}`);
  if (issuer.endsWith('/'))
    throw new WebhookError(
      'WIW_BAD_INPUT',
      `--issuer "${issuer}" ends with "/": AWS names OIDC providers without it and refuses such tokens; drop the slash`,
    );
  return url;
}

function publication(issuer: string, jwks: Jwks): Omit<Publication, 'files'> {
  checkIssuerUrl(issuer);
  if (jwks.keys.length === 0) throw new WebhookError('WIW_BAD_INPUT', 'no public key to publish');
  const jwksUri = issuer + JWKS_PATH;
  return {
    discovery: discoveryDocument(issuer, jwksUri, jwks),
    jwks,
    apiServerFlags: [`--service-account-issuer=${issuer}`, `--service-account-jwks-uri=${jwksUri}`],
  };
}

export async function publishIssuer(dir: string, issuer: string, jwks: Jwks): Promise<Publication> {
  const pub = publication(issuer, jwks);
  const files = [DISCOVERY_PATH.slice(1), JWKS_PATH.slice(1)];
  try {
    await mkdir(join(dir, '.well-known'), { recursive: true });
    await mkdir(join(dir, 'openid', 'v1'), { recursive: true });
    await writeFile(join(dir, files[0]), JSON.stringify(pub.discovery) + '\n');
    await writeFile(join(dir, files[1]), JSON.stringify(pub.jwks) + '\n');
  } catch (err) {
    throw new WebhookError('WIW_BAD_INPUT', `cannot write into ${dir}: ${ioProblem(err)}`);
  }
  return { ...pub, files };
}
