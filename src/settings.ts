// Settings: every one is a flag with an environment-variable twin, parsed and validated once at
// start-up; the parsers shared by the webhook's, the token requestor's and each cloud's settings.
import { ConfigError } from './errors.ts';

/** A flag and its environment twin (`--aws-default-region`, `WIW_AWS_DEFAULT_REGION`); flags win. */
export interface Setting<T> {
  flag: string;
  description: string;
  parse: (raw: string, flag: string) => T;
  default: T;
  /** Boolean switches take no value on the command line. */
  boolean?: true;
  /** The default as the flag is written, where String(default) would not be (an octal mode). */
  defaultText?: string;
}

/** One row of a flag table in help: the flag, then its text from column 40 (on its own line when longer). */
export function helpRow(left: string, text: string): string {
  return left.length < 40 ? left.padEnd(40) + text : `${left}\n${' '.repeat(40)}${text}`;
}

/** The default of a setting as help shows it, or nothing for none (undefined, an empty list). */
export function defaultOf(s: Setting<unknown>): string | undefined {
  if (s.defaultText !== undefined) return s.defaultText;
  if (s.default === undefined || (Array.isArray(s.default) && s.default.length === 0)) return undefined;
  return Array.isArray(s.default) ? s.default.join(',') : String(s.default);
}

export const string = (raw: string) => raw;
export const optionalString = (raw: string) => (raw === '' ? undefined : raw);

export function integer(min: number, max: number) {
  return (raw: string, flag: string): number => {
    if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`--${flag}="${raw}" is not a whole number`);
    const n = Number(raw);
    if (n < min || n > max) throw new ConfigError(`--${flag}=${n} is out of range; expected ${min} to ${max}`);
    return n;
  };
}

export function bool(raw: string, flag: string): boolean {
  const v = raw.trim().toLowerCase();
  if (v === 'true' || v === '1' || v === 'yes') return true;
  if (v === 'false' || v === '0' || v === 'no') return false;
  throw new ConfigError(`--${flag}="${raw}" must be true or false`);
}

export function oneOf<T extends string>(values: readonly T[]) {
  return (raw: string, flag: string): T => {
    if ((values as readonly string[]).includes(raw)) return raw as T;
    throw new ConfigError(`--${flag}="${raw}" must be one of: ${values.join(', ')}`);
  };
}

// An image reference as kubelets and registries read it (distribution's reference grammar):
// [registry[:port]/]path[:tag][@algorithm:hex]. A tag floats (the registry may move it); a digest
// pins the exact image.
const DOMAIN_PART = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const PATH_PART = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
export const IMAGE_REFERENCE = new RegExp(
  `^(?:${DOMAIN_PART}(?:\\.${DOMAIN_PART})*(?::[0-9]+)?/)?${PATH_PART}(?:/${PATH_PART})*` +
    '(?::[\\w][\\w.-]{0,127})?(?:@sha256:[a-f0-9]{64}|@sha512:[a-f0-9]{128})?$',
);

export function imageReference(raw: string, flag: string): string {
  const image = raw.trim();
  if (!IMAGE_REFERENCE.test(image) || image.length > 512)
    throw new ConfigError(
      `--${flag}=${JSON.stringify(raw)} is not an image reference: REGISTRY/PATH[:TAG][@sha256:DIGEST], for example registry.example/team/image:1.0@sha256:<64 hex digits>`,
    );
  return image;
}

export function httpsUrlList(raw: string, flag: string): string[] {
  const urls = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const url of urls) {
    if (URL.parse(url)?.protocol !== 'https:') throw new ConfigError(`--${flag}: "${url}" is not an https URL`);
  }
  return urls;
}

export function envName(flag: string): string {
  return 'WIW_' + flag.toUpperCase().replaceAll('-', '_');
}
