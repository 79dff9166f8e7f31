// Several roles in one Pod (the AWS peer's issue #20, which it does not offer): a shared config
// file with one web-identity profile per role, all presenting the same projected token. The SDKs
// read it through AWS_CONFIG_FILE; code picks a role by profile name, a container by AWS_PROFILE.
import { type Denial, isDenial } from '../../errors.ts';
import { clip } from '../../text.ts';
import { parseNamedEntries } from '../common.ts';
import { type RoleArn, type RoleArnBase, readRoleArn } from './role-arn.ts';

/** The Pod annotation the file is projected from (by the downward API, into the token volume). */
export const AWS_CONFIG_ANNOTATION = 'workload-identity-webhook.io/aws-config-file';
/** Its name in the token volume, beside `token`. */
export const AWS_CONFIG_FILE = 'config';
export const DEFAULT_PROFILE = 'default';

// Profile names the SDKs' INI readers and shells take as they are.
const PROFILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
export const MAX_PROFILE_NAME = 64;

export interface Profile {
  name: string;
  role: RoleArn;
  /** Role chaining (`source-profiles`): the profile whose credentials assume this role, instead of the token. */
  source?: string;
  /** `default` when it copies the first listed profile (neither role-arn nor an entry named it). */
  copyOf?: string;
}

/**
 * A name another annotation gave that is no profile of the shared config file: the name clipped
 * (it is the tenant's), then the profiles there are. One wording for container-profiles and
 * source-profiles.
 */
export function notAProfile(name: string, known: ReadonlySet<string>): string {
  return `${JSON.stringify(clip(name, 80))}, which is not one of the role-arns profiles (${[...known].join(', ')})`;
}

/** The problem with a profile name, undefined when it is one. */
export function profileNameProblem(name: string): string | undefined {
  return PROFILE_NAME.test(name)
    ? undefined
    : `profile "${name}" is not a profile name (letters, digits, "_", "." and "-", at most 64)`;
}

/**
 * The `role-arns` annotation: `<profile>=<role ARN, or role name with --aws-compose-role-arn>`
 * entries. Every value lands in a file the SDKs parse, so nothing malformed is let through, with
 * or without --strict.
 */
export function parseProfiles(value: string, where: string, base: RoleArnBase | undefined): Profile[] | Denial {
  const pairs = parseNamedEntries(value, {
    key: where,
    entry: '<profile>=<role>',
    form: 'expected <profile>=<role ARN> entries separated by commas or new lines',
    noun: 'role',
    nameProblem: profileNameProblem,
    twice: (name) => `profile "${name}" is named twice`,
  });
  if (isDenial(pairs)) return pairs;
  const profiles: Profile[] = [];
  for (const [name, raw] of pairs) {
    const role = readRoleArn(raw, `${where} profile ${name}`, base);
    if (isDenial(role)) return role;
    profiles.push({ name, role });
  }
  return profiles;
}

/**
 * The shared config file: `[default]` first, then `[profile <name>]` per role, each with the
 * role and the token file, or for a chained role its source profile (the SDKs then call
 * AssumeRole with that profile's credentials). Values are validated ARNs, names and a path: no
 * line can be injected.
 */
export function sharedConfigFile(profiles: readonly Profile[], tokenFile: string): string {
  return profiles
    .map((p) =>
      [
        p.name === DEFAULT_PROFILE ? '[default]' : `[profile ${p.name}]`,
        `role_arn = ${p.role.arn}`,
        p.source === undefined ? `web_identity_token_file = ${tokenFile}` : `source_profile = ${p.source}`,
      ].join('\n'),
    )
    .join('\n\n')
    .concat('\n');
}
