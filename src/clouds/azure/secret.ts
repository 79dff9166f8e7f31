import { denial, type Denial } from '../../errors.ts';
import { type AzureCloudName, type AzureStackEnvironment, authorityHostOf } from './environments.ts';
import { GUID_PATTERN } from './facts.ts';
import {
  requiredString,
  type ConfigObject,
  type SecretDerivation,
  type SecretDerivationContext,
  type SecretProvider,
} from '../secret-config.ts';

/**
 * The derived dotenv file. Azure SDKs have no credentials file of their own: every
 * DefaultAzureCredential and WorkloadIdentityCredential reads the `AZURE_*` variables, so a file
 * of exactly those lines is what a tool loads without hand-work (`set -a; . file`, dotenv
 * libraries, `process.loadEnvFile`, Docker's and systemd's env files).
 */
const AZURE_ENV_KEY = 'azure.env';

interface AzureSecretOptions {
  audience: string;
  cloud: AzureCloudName;
  stack?: AzureStackEnvironment;
}

const FIELDS = {
  clientID: 'the application (client) id of the Entra app or user-assigned managed identity',
  tenantID: 'the Entra tenant id',
  subscriptionID: 'the Azure subscription id',
} as const;

/** GEP-26 Azure: Gardener's WorkloadIdentityConfig (`clientID`, `tenantID`, `subscriptionID`, all GUIDs). */
export function createAzureSecretProvider(options: AzureSecretOptions): SecretProvider {
  const authorityHost = authorityHostOf(options.cloud, options.stack);
  return {
    name: 'azure',
    fields: Object.keys(FIELDS),
    derive(config: ConfigObject, { tokenPath }: SecretDerivationContext): SecretDerivation | Denial[] {
      const problems: Denial[] = [];
      const ids: Record<string, string> = {};
      for (const [field, what] of Object.entries(FIELDS)) {
        const value = requiredString(config, field, problems, `${what}, a GUID`);
        if (value === undefined) continue;
        if (!GUID_PATTERN.test(value)) {
          problems.push(
            denial(
              'InvalidConfig',
              `config.${field}="${value}" is not a GUID (${what}, such as 00000000-0000-0000-0000-000000000000)`,
            ),
          );
          continue;
        }
        ids[field] = value;
      }
      if (problems.length > 0) return problems;
      const { clientID, tenantID, subscriptionID } = ids;
      const env = [
        `AZURE_CLIENT_ID=${clientID}`,
        `AZURE_TENANT_ID=${tenantID}`,
        `AZURE_SUBSCRIPTION_ID=${subscriptionID}`,
        `AZURE_FEDERATED_TOKEN_FILE=${tokenPath}`,
        `AZURE_AUTHORITY_HOST=${authorityHost}`,
      ];
      return {
        provider: 'azure',
        keys: {
          clientID,
          tenantID,
          subscriptionID,
          workloadIdentityTokenFile: tokenPath,
          [AZURE_ENV_KEY]: env.join('\n') + '\n',
        },
        account: { tenantID, subscriptionID },
        audience: options.audience,
        identity: {
          clientId: clientID,
          tenantId: tenantID,
          subscriptionId: subscriptionID,
          cloud: options.cloud,
          audience: options.audience,
        },
      };
    },
  };
}
