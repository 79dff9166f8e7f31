// Azure's national clouds and the token audience Entra expects: plain facts the flags, the
// provider and tenant policy all read, so configuration needs no provider code.
import { readFileSync } from 'node:fs';
import { ConfigError, errorMessage } from '../../errors.ts';
import { isObject } from '../../model.ts';

export const AZURE_AUDIENCE = 'api://AzureADTokenExchange';

export const AZURE_CLOUDS = {
  AzurePublicCloud: 'https://login.microsoftonline.com/',
  AzureUSGovernmentCloud: 'https://login.microsoftonline.us/',
  AzureChinaCloud: 'https://login.chinacloudapi.cn/',
  // Closed to new customers, still known to the peer (go-autorest's GermanCloud).
  AzureGermanCloud: 'https://login.microsoftonline.de/',
} as const;
export type AzureCloud = keyof typeof AZURE_CLOUDS;

/** Azure Stack Hub: its endpoints are the operator's, read from a file (go-autorest's EnvironmentFromFile). */
export const AZURE_STACK_CLOUD = 'AzureStackCloud';
export type AzureCloudName = AzureCloud | typeof AZURE_STACK_CLOUD;

/** The environment file of an Azure Stack Hub, as far as this webhook reads it. */
export interface AzureStackEnvironment {
  file: string;
  /** Its activeDirectoryEndpoint: AZURE_AUTHORITY_HOST. */
  authorityHost: string;
}

/**
 * Reads the JSON file the peer names by AZURE_ENVIRONMENT_FILEPATH (go-autorest's Environment,
 * whose keys Go matches in any case), once at start-up.
 */
export function readAzureStackEnvironment(file: string, flag: string): AzureStackEnvironment {
  const where = `--${flag}="${file}"`;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${where}: cannot read the Azure environment file: ${errorMessage(err)}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`${where}: the Azure environment file is not JSON: ${errorMessage(err)}`);
  }
  if (!isObject(parsed))
    throw new ConfigError(`${where}: the Azure environment file must hold a JSON object (go-autorest's Environment)`);
  const key = Object.keys(parsed).find((k) => k.toLowerCase() === 'activedirectoryendpoint');
  const value = key === undefined ? undefined : (parsed as Record<string, unknown>)[key];
  if (typeof value !== 'string' || URL.parse(value)?.protocol !== 'https:')
    throw new ConfigError(
      `${where}: "activeDirectoryEndpoint" is ${value === undefined ? 'missing' : JSON.stringify(value)}; expected the https URL of the stack's Entra or AD FS authority, such as "https://adfs.local.azurestack.external/adfs/" (it becomes AZURE_AUTHORITY_HOST)`,
    );
  return { file, authorityHost: value as string };
}

/** AZURE_AUTHORITY_HOST of a cloud; AzureStackCloud's comes from its environment file. */
export function authorityHostOf(cloud: AzureCloudName, stack: AzureStackEnvironment | undefined): string {
  if (cloud !== AZURE_STACK_CLOUD) return AZURE_CLOUDS[cloud];
  // loadConfig refuses AzureStackCloud without its file: this is a programming error.
  if (!stack) throw new Error('AzureStackCloud needs its environment file');
  return stack.authorityHost;
}
