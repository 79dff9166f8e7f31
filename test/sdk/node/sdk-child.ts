// An application using one official Node.js cloud SDK the way applications do: the default
// credential chain, configured by nothing but the environment. Driven by the test over stdin
// and stdout, one JSON object per line:
//   {"op":"versions"}             -> {"ok":true,"versions":{...}}
//   {"op":"credentials"}          -> {"ok":true,...} or {"ok":false,"error":{...}}
//   {"op":"credentials","profile":"p"}  (AWS) the same, from the named profile of the config file
//   {"op":"advance","seconds":N}  -> {"ok":true}   (time passes for this process)
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const cloud = process.argv[2];
const SCOPE_AZURE = 'https://management.azure.com/.default';
const SCOPE_GCP = 'https://www.googleapis.com/auth/cloud-platform';

type Answer = Record<string, unknown>;
let getCredentials: (profile?: string) => Promise<Answer>;
let packages: string[];

switch (cloud) {
  case 'aws': {
    const { fromNodeProviderChain } = await import('@aws-sdk/credential-providers');
    // Built once (per profile), as an application builds its client once; it caches and refreshes by itself.
    const chains = new Map<string, ReturnType<typeof fromNodeProviderChain>>();
    getCredentials = async (profile) => {
      const key = profile ?? '';
      if (!chains.has(key)) chains.set(key, fromNodeProviderChain(profile === undefined ? {} : { profile }));
      const c = await chains.get(key)!();
      return {
        accessKeyId: c.accessKeyId,
        secretAccessKey: c.secretAccessKey,
        sessionToken: c.sessionToken,
        expiration: c.expiration?.toISOString(),
      };
    };
    packages = [
      '@aws-sdk/credential-providers',
      '@aws-sdk/credential-provider-web-identity',
      '@aws-sdk/nested-clients',
    ];
    break;
  }
  case 'azure': {
    const { DefaultAzureCredential } = await import('@azure/identity');
    const credential = new DefaultAzureCredential();
    getCredentials = async () => {
      const t = await credential.getToken(SCOPE_AZURE);
      return { token: t.token, expiresOnTimestamp: t.expiresOnTimestamp };
    };
    packages = ['@azure/identity', '@azure/msal-node'];
    break;
  }
  case 'gcp': {
    const { GoogleAuth } = await import('google-auth-library');
    const auth = new GoogleAuth({ scopes: SCOPE_GCP });
    getCredentials = async () => {
      const client = await auth.getClient();
      const { token } = await client.getAccessToken();
      return { token, client: client.constructor.name };
    };
    packages = ['google-auth-library', 'gaxios'];
    break;
  }
  default:
    throw new Error(`usage: sdk-child.ts aws|azure|gcp (got ${cloud})`);
}

function versions(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of packages) {
    const url = new URL(`../../../node_modules/${name}/package.json`, import.meta.url);
    out[name] = (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
  }
  return out;
}

/** What the test asserts on: the SDK's own error class and the cloud's code and message. */
function describeError(err: unknown): Answer {
  const e = err as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  return {
    name: e?.name,
    message: String(e?.message ?? err),
    code: e?.Code ?? e?.code ?? e?.errorResponse?.error,
    status: e?.$metadata?.httpStatusCode ?? e?.statusCode ?? e?.response?.status ?? e?.status,
    body: e?.response?.data ?? e?.errorResponse,
  };
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const request = JSON.parse(line) as { op: string; seconds?: number; profile?: string };
  let answer: Answer;
  try {
    if (request.op === 'versions') answer = { ok: true, versions: versions() };
    else if (request.op === 'credentials') answer = { ok: true, ...(await getCredentials(request.profile)) };
    else if (request.op === 'advance') {
      (globalThis as unknown as Record<symbol, (s: number) => void>)[Symbol.for('wiw.sdk.advanceClock')](
        request.seconds!,
      );
      answer = { ok: true };
    } else answer = { ok: false, error: { message: `unknown op ${request.op}` } };
  } catch (err) {
    answer = { ok: false, error: describeError(err) };
  }
  process.stdout.write(JSON.stringify(answer) + '\n');
}
