// The ServiceAccount's annotations as the GCP provider reads them, in either dialect: the provider
// and Google service account it names, the audience, where the credential file goes (the layout)
// and the token's expiry. Each reader returns its value or a refusal that names the annotation.
import { denial, type Denial, isDenial } from '../../errors.ts';
import { CLOUDS } from '../registry.ts';
import { boundExpiration, parseSeconds, tolerated } from '../common.ts';
import { GCP_KEYS, RUN_AS_USER_ANNOTATION } from './conventions.ts';
import {
  PROVIDER_FORM,
  parseWorkloadIdentityProvider,
  EMAIL_PATTERN,
  type WorkloadIdentityProvider,
} from './external-account.ts';
import { AUDIENCE } from './facts.ts';
import type { GcpOptions } from './options.ts';

export type InjectionMode = 'direct' | 'gcloud';
type Layout = 'projected' | 'pfnet-gcloud' | 'pfnet-direct';

/** Reads one of two dialect keys; both set to different values is a conflict, not a guess. */
function dialectValue(
  annotations: Readonly<Record<string, string>>,
  keys: readonly [string, string],
  saName: string,
): [key: string, value: string] | Denial | undefined {
  const a = annotations[keys[0]]?.trim();
  const b = annotations[keys[1]]?.trim();
  if (a && b && a !== b) {
    return denial('ConflictingAnnotations', `${saName} sets both ${keys[0]}="${a}" and ${keys[1]}="${b}"; keep one`);
  }
  if (a) return [keys[0], a];
  if (b) return [keys[1], b];
  return undefined;
}

// pfnet accepts any projects/.+/locations/.+/workloadIdentityPools/.+/providers/.+ name. Outside
// --strict such a name is passed through, but in every mode only within the characters of Google's
// resource names and the braces of the placeholders pfnet's own examples write
// (projects/{PROJECT_NUMBER}/...): the name reaches env values, a file and pfnet's setup script, so
// no shell, quote, glob or white-space character.
const PFNET_PROVIDER_FORM = /^projects\/.+\/locations\/.+\/workloadIdentityPools\/.+\/providers\/.+$/;
const LOOSE_PART = '[A-Za-z0-9_.:{}-]+';
const LOOSE_PROVIDER = new RegExp(
  `^projects/(${LOOSE_PART})/locations/${LOOSE_PART}/workloadIdentityPools/(${LOOSE_PART})/providers/(${LOOSE_PART})$`,
);
const LOOSE_CHARACTERS = 'letters, digits and "-_.:{}"';

/**
 * A provider name of pfnet's form that is not Google's: passed through with a warning outside
 * --strict; undefined when it is not even pfnet's form (the caller's denial stands). One with a
 * character outside LOOSE_CHARACTERS is refused in every mode.
 */
function looseProvider(
  value: string,
  key: string,
  saName: string,
  problem: Denial,
  strict: boolean,
  warnings: string[],
): WorkloadIdentityProvider | Denial | undefined {
  const loose = LOOSE_PROVIDER.exec(value);
  if (!loose) {
    if (!PFNET_PROVIDER_FORM.test(value)) return undefined;
    return denial(
      'InvalidWorkloadIdentityProvider',
      `${saName} annotation ${key}="${value}" holds a character no workload identity provider holds (only ${LOOSE_CHARACTERS} between the slashes), with or without --strict; expected ${PROVIDER_FORM}`,
    );
  }
  const accepted = tolerated(strict, warnings, problem, undefined, 'passing it through');
  if (accepted !== undefined) return accepted;
  return { name: value, projectNumber: loose[1], pool: loose[2], provider: loose[3] };
}

/** The provider and the Google service account the ServiceAccount names, in either dialect; pfnet's when its provider key names it. */
export function readNamed(
  options: GcpOptions,
  sa: Readonly<Record<string, string>>,
  saName: string,
  warnings: string[],
): { provider: WorkloadIdentityProvider; email: string | undefined; pfnet: boolean } | Denial | undefined {
  const providerEntry = dialectValue(sa, GCP_KEYS.provider, saName);
  if (providerEntry === undefined || isDenial(providerEntry)) return providerEntry;
  const [key, value] = providerEntry;
  const pfnet = key === GCP_KEYS.provider[0];
  let provider = parseWorkloadIdentityProvider(value, `${saName} annotation ${key}`);
  if (isDenial(provider) && pfnet)
    provider = looseProvider(value.trim(), key, saName, provider, options.strict ?? false, warnings) ?? provider;
  if (isDenial(provider)) return provider;

  const emailEntry = dialectValue(sa, GCP_KEYS.email, saName);
  if (emailEntry !== undefined && isDenial(emailEntry)) return emailEntry;
  const email = emailEntry?.[1];
  if (emailEntry !== undefined && !EMAIL_PATTERN.test(emailEntry[1])) {
    return denial(
      'InvalidServiceAccountEmail',
      `${saName} annotation ${emailEntry[0]}="${emailEntry[1]}" is not a Google service account email; expected NAME@PROJECT.iam.gserviceaccount.com`,
    );
  }
  return { provider, email, pfnet };
}

/** The ServiceAccount's audience over the flag's or tenant policy's over the dialect's, each of AUDIENCE's characters. */
export function readAudience(
  options: GcpOptions,
  sa: Readonly<Record<string, string>>,
  saName: string,
  dialect: string,
): string | Denial {
  const raw = sa[GCP_KEYS.audience];
  const audience = raw?.trim() || options.audience || dialect;
  if (AUDIENCE.pattern.test(audience)) return audience;
  const what = raw?.trim()
    ? `${saName} annotation ${GCP_KEYS.audience}="${raw}"`
    : `the audience "${audience}" (--gcp-audience or tenant policy)`;
  return denial('InvalidAnnotation', `${what} is not an audience: ${AUDIENCE.what}, with or without --strict`);
}

/** runAsUser's bound: the API server refuses a user id above 2^31-1. */
const MAX_USER_ID = 2 ** 31 - 1;

/** Where the credential file goes: the Flux dialect's projected volume, or pfnet's two modes. */
export function readLayout(
  options: GcpOptions,
  sa: Readonly<Record<string, string>>,
  saName: string,
  { email, pfnet }: { email: string | undefined; pfnet: boolean },
): { layout: Layout; mode: InjectionMode | undefined; runAsUser: number | undefined } | Denial {
  // Case-insensitive, as pfnet's identityconfig.go reads it.
  const rawMode = sa[GCP_KEYS.injectionMode];
  const mode = rawMode?.trim().toLowerCase() || undefined;
  if (mode !== undefined && mode !== 'direct' && mode !== 'gcloud') {
    return denial(
      'InvalidAnnotation',
      `${saName} annotation ${GCP_KEYS.injectionMode}="${rawMode}" must be "direct" or "gcloud"`,
    );
  }
  // pfnet's gcloud mode needs the Google service account to log in as; without one the pfnet
  // peer refuses the ServiceAccount, and direct resource access needs no gcloud login.
  if (pfnet && mode === 'gcloud' && !email) {
    return denial(
      'InvalidAnnotation',
      `${saName} annotation ${GCP_KEYS.injectionMode}="gcloud" needs ${GCP_KEYS.email[0]}: gcloud logs in as that Google service account`,
    );
  }
  const layout = !pfnet
    ? 'projected'
    : (mode ?? (email ? (options.defaultInjectionMode ?? 'gcloud') : 'direct')) === 'gcloud'
      ? 'pfnet-gcloud'
      : 'pfnet-direct';
  const runAsUser = sa[RUN_AS_USER_ANNOTATION];
  if (runAsUser !== undefined && !/^\d{1,10}$/.test(runAsUser.trim())) {
    return denial(
      'InvalidAnnotation',
      `${saName} annotation cloud.google.com/gcloud-run-as-user="${runAsUser}" is not a user id; expected a whole number such as "1000"`,
    );
  }
  const userId = runAsUser !== undefined ? Number(runAsUser.trim()) : undefined;
  if (userId !== undefined && userId > MAX_USER_ID)
    return denial(
      'InvalidAnnotation',
      `${saName} annotation cloud.google.com/gcloud-run-as-user="${runAsUser}" is out of range; expected a user id from 0 to ${MAX_USER_ID} (the API server refuses a larger runAsUser)`,
    );
  return { layout, mode, runAsUser: userId };
}

/** The Pod's token expiry annotation over the ServiceAccount's over the flag, held to GCP's bounds. */
export function readExpiration(
  options: GcpOptions,
  podExpiration: string | undefined,
  sa: Readonly<Record<string, string>>,
  saName: string,
): number | Denial {
  let expiration = options.defaultTokenExpiration;
  const rawExpiration = podExpiration ?? sa[GCP_KEYS.expiration];
  if (rawExpiration !== undefined) {
    const parsed = parseSeconds(rawExpiration, GCP_KEYS.expiration, podExpiration !== undefined ? 'Pod' : saName);
    if (typeof parsed !== 'number') return parsed;
    expiration = parsed;
  }
  return boundExpiration(expiration, CLOUDS.gcp.tokenBounds, GCP_KEYS.expiration, saName);
}
