import { AWS_REGION_PATTERN } from './facts.ts';
import { denial, type Denial, isDenial } from '../../errors.ts';
import { parseRoleArn } from './role-arn.ts';
import {
  requiredString,
  stringField,
  type ConfigObject,
  type SecretDerivation,
  type SecretDerivationContext,
  type SecretProvider,
} from '../secret-config.ts';

interface AwsSecretOptions {
  audience: string;
  /** `region` of the credentials file when the config names none (the webhook's --aws-default-region). */
  defaultRegion: string | undefined;
}

/**
 * GEP-26 AWS: Gardener's WorkloadIdentityConfig (`roleARN`) plus an optional `region`, derived
 * into Gardener's keys. `credentialsFile` is a shared config file: with AWS_CONFIG_FILE (or
 * AWS_SHARED_CREDENTIALS_FILE) pointing at it, the SDKs and the CLI assume the role with the
 * mounted token and need nothing else.
 */
export function createAwsSecretProvider(options: AwsSecretOptions): SecretProvider {
  return {
    name: 'aws',
    fields: ['roleARN', 'region'],
    derive(config: ConfigObject, { tokenPath }: SecretDerivationContext): SecretDerivation | Denial[] {
      const problems: Denial[] = [];
      const rawArn = requiredString(
        config,
        'roleARN',
        problems,
        'the IAM role the token is exchanged for (arn:aws:iam::<account>:role/<name>)',
      );
      const role = rawArn === undefined ? undefined : parseRoleArn(rawArn, 'config.roleARN');
      if (role && isDenial(role)) problems.push(role);
      const configRegion = stringField(config, 'region', problems);
      if (configRegion !== undefined && !AWS_REGION_PATTERN.test(configRegion)) {
        problems.push(
          denial('InvalidConfig', `config.region="${configRegion}" is not an AWS region (for example eu-west-1)`),
        );
      }
      if (problems.length > 0 || !role || isDenial(role)) return problems;
      const region = configRegion || options.defaultRegion;

      const lines = ['[default]', `role_arn = ${role.arn}`, `web_identity_token_file = ${tokenPath}`];
      if (region) lines.push(`region = ${region}`);
      const identity: Record<string, string> = { roleArn: role.arn, account: role.account, audience: options.audience };
      if (region) identity.region = region;
      return {
        provider: 'aws',
        keys: {
          roleARN: role.arn,
          workloadIdentityTokenFile: tokenPath,
          credentialsFile: lines.join('\n') + '\n',
        },
        account: {},
        audience: options.audience,
        identity,
      };
    },
  };
}
