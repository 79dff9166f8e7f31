// The cloud identities the tests hand out, named once: an AWS account and its roles, an Azure
// tenant and applications, a GCP project, its workload identity pool and service account, and a
// second of each where a test needs two. All are examples, none a real account. A test about an
// odd form (a malformed ARN, a GUID the webhook must refuse) writes its value beside its assertion.

// AWS
export const AWS_ACCOUNT = '111122223333';
/** An IAM role ARN in AWS_ACCOUNT. */
export const roleArn = (name: string, account = AWS_ACCOUNT): string => `arn:aws:iam::${account}:role/${name}`;
/** The IAM OIDC identity provider, in `account`, of a cluster whose issuer is `https://<hostPath>`. */
export const oidcProviderArn = (hostPath: string, account = AWS_ACCOUNT): string =>
  `arn:aws:iam::${account}:oidc-provider/${hostPath}`;
export const ROLE_ARN = roleArn('s3-reader');
/** A role under a path. */
export const PATH_ROLE_ARN = roleArn('team/s3-reader');
/** Another account: a role in it is a cross-account role. */
export const OTHER_AWS_ACCOUNT = '444455556666';
export const OTHER_ACCOUNT_ROLE_ARN = roleArn('s3-writer', OTHER_AWS_ACCOUNT);

// Azure
export const TENANT = '72f988bf-86f1-41af-91ab-2d7cd011db47';
export const CLIENT = '8f3b2c1a-7d4e-4f5a-9b6c-0d1e2f3a4b5c';
export const SUBSCRIPTION = '0b1f6471-1bf0-4dda-aec3-cb9272f09590';
/** A second application, or a second tenant. */
export const OTHER_ID = '0b9e2a51-5c2f-4b8e-9a3d-1f7c6e5d4b3a';
/** A tenant, client or subscription other than the ones above: what a changed value changes to. */
export const CHANGED_ID = '11111111-2222-3333-4444-555555555555';

// GCP
export const GCP_PROJECT = 'my-project';
export const PROJECT_NUMBER = '123456789012';
export const POOL = 'on-prem';
/** The workload identity provider the tests' clusters are registered as. */
export const WIF_PROVIDER = `projects/${PROJECT_NUMBER}/locations/global/workloadIdentityPools/${POOL}/providers/cluster-a`;
export const GCP_AUDIENCE = `//iam.googleapis.com/${WIF_PROVIDER}`;
export const GCP_EMAIL = `reader@${GCP_PROJECT}.iam.gserviceaccount.com`;
/** A second project, with its own pool and service account (several providers in one Pod). */
export const BILLING_PROJECT_NUMBER = '555555555555';
export const BILLING_PROVIDER = `projects/${BILLING_PROJECT_NUMBER}/locations/global/workloadIdentityPools/billing-pool/providers/cluster-a`;
export const BILLING_EMAIL = 'exporter@billing-project.iam.gserviceaccount.com';
