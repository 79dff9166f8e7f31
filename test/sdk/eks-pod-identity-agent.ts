// The EKS Pod Identity Agent, judged as EKS Auth's AssumeRoleForPodIdentity does: the container's
// token (sent by the SDK as the Authorization header) must verify against the cluster's JWKS, come
// from the cluster's issuer, name the audience pods.eks.amazonaws.com and a ServiceAccount that has
// an association. The agent listens on plain HTTP at a link-local address; here on loopback, which
// the SDKs accept for AWS_CONTAINER_CREDENTIALS_FULL_URI as they accept 169.254.170.23.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ClusterIssuer, tokenDigest } from './oidc.ts';

export const POD_IDENTITY_AUDIENCE = 'pods.eks.amazonaws.com';

export interface PodIdentityExchange {
  subject: string;
  roleArn: string;
  tokenDigest: string;
  accessKeyId: string;
}

export interface PodIdentityAgent {
  /** AWS_CONTAINER_CREDENTIALS_FULL_URI for the webhook's flag. */
  fullUri: string;
  /** Set once the cluster is up: the agent refuses every request until then. */
  issuer: ClusterIssuer | undefined;
  exchanges: PodIdentityExchange[];
  errors: { status: number; code: string; message: string }[];
  stop(): Promise<void>;
}

/** `associations`: `system:serviceaccount:<ns>:<name>` to the role EKS would assume for it. */
export async function startPodIdentityAgent(associations: Record<string, string>): Promise<PodIdentityAgent> {
  const agent: PodIdentityAgent = { fullUri: '', issuer: undefined, exchanges: [], errors: [], stop: async () => {} };
  const server = createServer(async (req, res) => {
    const answer = (status: number, body: object) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    // EKS Auth's error shapes: an exception name and a message.
    const fail = (status: number, code: string, message: string) => {
      agent.errors.push({ status, code, message });
      answer(status, { code, message });
    };
    if (req.method !== 'GET' || req.url !== '/v1/credentials') return fail(404, 'NotFound', `${req.method} ${req.url}`);
    const token = req.headers.authorization;
    if (!token) return fail(400, 'InvalidRequestException', 'missing Authorization header (the service account token)');
    if (!agent.issuer) return fail(503, 'ServiceUnavailableException', 'the agent has no cluster yet');
    const verified = await agent.issuer.verify(token, new Date());
    if (!verified.ok) {
      const code = verified.reason === 'expired' ? 'ExpiredTokenException' : 'InvalidTokenException';
      return fail(400, code, `${verified.reason}: ${verified.detail}`);
    }
    if (!verified.audiences.includes(POD_IDENTITY_AUDIENCE))
      return fail(
        400,
        'InvalidTokenException',
        `audience ${verified.audiences.join(',')} is not ${POD_IDENTITY_AUDIENCE}`,
      );
    const roleArn = associations[verified.payload.sub];
    if (!roleArn) return fail(400, 'AccessDeniedException', `no Pod Identity association for ${verified.payload.sub}`);
    const accessKeyId = `ASIA${randomBytes(8).toString('hex').toUpperCase()}`;
    agent.exchanges.push({ subject: verified.payload.sub, roleArn, tokenDigest: tokenDigest(token), accessKeyId });
    answer(200, {
      AccessKeyId: accessKeyId,
      SecretAccessKey: randomBytes(30).toString('base64'),
      Token: randomBytes(180).toString('base64'),
      AccountId: roleArn.split(':')[4],
      Expiration: new Date(Date.now() + 3600 * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  agent.fullUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/credentials`;
  agent.stop = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return agent;
}
