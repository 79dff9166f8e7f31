// The EC2 instance identity document, read once at start-up for --aws-compose-role-arn without
// --aws-compose-role-arn-account, as the peer reads it (aws-sdk-go-v2's imds client): IMDSv2 with
// a session token, IMDSv1 only where the token endpoint does not exist.
import { ConfigError, errorMessage } from '../../errors.ts';
import { AWS_ACCOUNT_ID, AWS_REGION_NAME } from './facts.ts';

const DEFAULT_ENDPOINT = 'http://169.254.169.254';
const TIMEOUT_MS = 2000;

export interface InstanceIdentity {
  accountId: string;
  region: string;
}

/** The SDKs' override of the endpoint (AWS_EC2_METADATA_SERVICE_ENDPOINT), else the link-local one. */
function imdsEndpoint(env: NodeJS.ProcessEnv = process.env): string {
  return (env.AWS_EC2_METADATA_SERVICE_ENDPOINT || DEFAULT_ENDPOINT).replace(/\/+$/, '');
}

async function call(url: string, init: RequestInit): Promise<Response> {
  return fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(TIMEOUT_MS) });
}

/** Reads the document; throws a ConfigError naming the endpoint, the step and the flag that avoids it. */
export async function readInstanceIdentity(endpoint: string = imdsEndpoint()): Promise<InstanceIdentity> {
  const fail = (what: string): never => {
    throw new ConfigError(
      `--aws-compose-role-arn: cannot read the EC2 instance identity document at ${endpoint} (${what}); give the account with --aws-compose-role-arn-account`,
    );
  };
  const headers: Record<string, string> = {};
  try {
    const token = await call(`${endpoint}/latest/api/token`, {
      method: 'PUT',
      headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '21600' },
    });
    if (token.ok) headers['X-aws-ec2-metadata-token'] = await token.text();
    // IMDSv1-only endpoints answer 404 or 405 here; anything else is a refusal.
    else if (token.status !== 404 && token.status !== 405) fail(`session token: HTTP ${token.status}`);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    fail(`session token: ${errorMessage(err)}`);
  }
  let text = '';
  try {
    const res = await call(`${endpoint}/latest/dynamic/instance-identity/document`, { headers });
    if (!res.ok) fail(`document: HTTP ${res.status}`);
    text = await res.text();
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    fail(`document: ${errorMessage(err)}`);
  }
  let doc: { accountId?: unknown; region?: unknown };
  try {
    doc = JSON.parse(text) as typeof doc;
  } catch {
    return fail('the document is not JSON');
  }
  if (typeof doc?.accountId !== 'string' || !AWS_ACCOUNT_ID.test(doc.accountId))
    fail('the document has no 12-digit accountId');
  if (typeof doc.region !== 'string' || !AWS_REGION_NAME.test(doc.region)) fail('the document has no region');
  return { accountId: doc.accountId as string, region: doc.region as string };
}
