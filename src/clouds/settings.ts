// The clouds' settings: each cloud's flags (clouds/<cloud>/settings.ts) and the one they share,
// joined into one table that config.ts spreads into the webhook's; the slice of the configuration
// a cloud receives (Cloud.options, Cloud.secretProvider); and what the clouds derive from their
// values at start-up (files read once). A new cloud adds its table and, if needed, its derivation.
import { bool, type Setting } from '../settings.ts';
import type { RoleArnBase } from './aws/role-arn.ts';
import { AWS_SETTINGS, completeAwsSettings, deriveAwsSettings } from './aws/settings.ts';
import type { AzureStackEnvironment } from './azure/environments.ts';
import { AZURE_SETTINGS, deriveAzureSettings } from './azure/settings.ts';
import { GCP_SETTINGS } from './gcp/settings.ts';

export const CLOUD_SETTINGS = {
  strict: {
    flag: 'strict',
    description:
      'Refuse annotation values a peer webhook accepted and read its own way (default: admit them with that reading and an admission warning; docs/compatibility.md)',
    parse: bool,
    default: false,
    boolean: true,
  },
  ...AWS_SETTINGS,
  ...AZURE_SETTINGS,
  ...GCP_SETTINGS,
} satisfies Record<string, Setting<unknown>>;

type Table = typeof CLOUD_SETTINGS;
/** The values of a settings table: each setting's default or what its parser returns. */
export type SettingValues<T extends Record<string, Setting<unknown>>> = {
  [K in keyof T]: T[K]['default'] | ReturnType<T[K]['parse']>;
};

/** What a cloud receives of the configuration: its flags' values and what they derive. */
export type CloudSettings = SettingValues<Table> & {
  /** AzureStackCloud's environment file, read once at start-up. */
  azureStack?: AzureStackEnvironment;
  /** Where --aws-compose-role-arn completes bare role names: from the flags, or completeCloudSettings's look-up. */
  awsRoleArnBase?: RoleArnBase;
};

/** Settings that depend on each other within one cloud, and what they derive; throws ConfigError. */
export function deriveCloudSettings(values: SettingValues<Table>): CloudSettings {
  return { ...values, ...deriveAzureSettings(values), ...deriveAwsSettings(values) };
}

/** What the clouds derive by a look-up at start-up (the EC2 instance identity document); throws ConfigError. */
export async function completeCloudSettings(settings: CloudSettings): Promise<Partial<CloudSettings>> {
  return completeAwsSettings(settings);
}
