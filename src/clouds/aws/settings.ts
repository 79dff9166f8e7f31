// AWS's flags and their environment twins (WIW_AWS_...), part of the webhook's settings.
import { ConfigError } from '../../errors.ts';
import { bool, integer, type Setting, string } from '../../settings.ts';
import { CLOUDS } from '../registry.ts';

// The peer passes its --aws-default-region through untouched, so the flag refuses only what no
// SDK could read as a region name; region shapes AWS adds later keep working.
const AWS_REGION_NAME = /^[a-z0-9]+(-[a-z0-9]+)*$/;
function awsRegion(raw: string, flag: string): string | undefined {
  if (raw === '') return undefined;
  if (!AWS_REGION_NAME.test(raw))
    throw new ConfigError(
      `--${flag}="${raw}" is not an AWS region name (lower-case letters, digits and hyphens, for example eu-west-1 or eusc-de-east-1)`,
    );
  return raw;
}

function dnsSubdomain(raw: string, flag: string): string {
  if (!/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(raw)) throw new ConfigError(`--${flag}="${raw}" is not a DNS subdomain`);
  return raw;
}

export const AWS_SETTINGS = {
  awsAnnotationPrefix: {
    flag: 'aws-annotation-prefix',
    description: 'Annotation prefix of the AWS keys',
    parse: dnsSubdomain,
    default: 'eks.amazonaws.com',
  },
  awsDefaultRegion: {
    flag: 'aws-default-region',
    description: 'AWS_REGION and AWS_DEFAULT_REGION for containers that set neither',
    parse: awsRegion,
    default: undefined,
  },
  awsAudience: {
    flag: 'aws-audience',
    description: 'Token audience when the ServiceAccount names none',
    parse: string,
    default: 'sts.amazonaws.com',
  },
  awsTokenExpiration: {
    flag: 'aws-token-expiration',
    description: 'Token expiry in seconds when no annotation sets one',
    parse: integer(CLOUDS.aws.tokenBounds.min, CLOUDS.aws.tokenBounds.max),
    default: 86400,
  },
  awsStsRegionalEndpoints: {
    flag: 'aws-sts-regional-endpoints',
    description: 'Inject AWS_STS_REGIONAL_ENDPOINTS=regional unless the ServiceAccount says otherwise',
    parse: bool,
    default: false,
    boolean: true,
  },
} satisfies Record<string, Setting<unknown>>;
