// Azure's national clouds and the token audience Entra expects: plain facts the flags, the
// provider and tenant policy all read, so configuration needs no provider code.
export const AZURE_AUDIENCE = 'api://AzureADTokenExchange';

export const AZURE_CLOUDS = {
  AzurePublicCloud: 'https://login.microsoftonline.com/',
  AzureUSGovernmentCloud: 'https://login.microsoftonline.us/',
  AzureChinaCloud: 'https://login.chinacloudapi.cn/',
  // Closed to new customers, still known to the peer (go-autorest's GermanCloud).
  AzureGermanCloud: 'https://login.microsoftonline.de/',
} as const;
export type AzureCloud = keyof typeof AZURE_CLOUDS;
