// Reads a spec strictly, collecting problems with the path of the offending field, as the API
// server words schema errors. Tenant policy reads its objects with it, and each cloud folder its
// identity provider's part.
import { DNS_LABEL } from './model.ts';

/** A field of the spec that is not as the schema says: its path and what is wrong there. */
export interface SpecProblem {
  reason: 'InvalidSpec';
  path: string;
  message: string;
}

export class SpecReader {
  readonly problems: SpecProblem[] = [];

  fail(path: string, message: string): undefined {
    this.problems.push({ reason: 'InvalidSpec', path, message });
    return undefined;
  }

  object(v: unknown, path: string, keys: readonly string[]): Record<string, unknown> | undefined {
    if (v === undefined || v === null) return this.fail(path, 'Required value: an object');
    if (typeof v !== 'object' || Array.isArray(v))
      return this.fail(path, `Invalid value: ${describe(v)}: must be an object`);
    const o = v as Record<string, unknown>;
    for (const key of Object.keys(o)) {
      if (!keys.includes(key))
        this.fail(
          `${path}.${key}`,
          `unknown field; the fields of ${path.replace(/\[\d+\]/g, '[]')} are ${keys.join(', ')}`,
        );
    }
    return o;
  }

  list<T>(v: unknown, path: string, item: (v: unknown, path: string) => T | undefined): T[] {
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) {
      this.fail(path, `Invalid value: ${describe(v)}: must be a list`);
      return [];
    }
    const out: T[] = [];
    v.forEach((x, i) => {
      const t = item(x, `${path}[${i}]`);
      if (t !== undefined) out.push(t);
    });
    return out;
  }

  string(v: unknown, path: string, required: boolean): string | undefined {
    if (v === undefined || v === null) return required ? this.fail(path, 'Required value') : undefined;
    if (typeof v !== 'string') return this.fail(path, `Invalid value: ${describe(v)}: must be a string`);
    if (required && v.trim() === '') return this.fail(path, 'Required value: must not be empty');
    return v;
  }

  matching(v: unknown, path: string, pattern: RegExp, what: string, required = false): string | undefined {
    const s = this.string(v, path, required);
    if (s === undefined) return undefined;
    if (!pattern.test(s)) return this.fail(path, `Invalid value: ${JSON.stringify(s)}: ${what}`);
    return s;
  }

  name(v: unknown, path: string): string | undefined {
    const s = this.matching(v, path, DNS_LABEL, 'a lowercase name of letters, digits and "-"', true);
    if (s !== undefined && s.length > 63)
      return this.fail(path, `Invalid value: ${JSON.stringify(s)}: at most 63 characters`);
    return s;
  }

  integer(v: unknown, path: string, min: number, max: number): number | undefined {
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v))
      return this.fail(path, `Invalid value: ${describe(v)}: must be a whole number`);
    if (v < min || v > max) return this.fail(path, `Invalid value: ${v}: must be between ${min} and ${max}`);
    return v;
  }

  boolean(v: unknown, path: string): boolean | undefined {
    if (typeof v !== 'boolean') return this.fail(path, `Invalid value: ${describe(v)}: must be true or false`);
    return v;
  }

  stringMap(v: unknown, path: string): Record<string, string> | undefined {
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'object' || Array.isArray(v))
      return this.fail(path, `Invalid value: ${describe(v)}: must be a map of strings`);
    for (const [k, x] of Object.entries(v))
      if (typeof x !== 'string') this.fail(`${path}.${k}`, `Invalid value: ${describe(x)}: must be a string`);
    return v as Record<string, string>;
  }

  unique(items: { name: string }[], path: string): void {
    const seen = new Set<string>();
    items.forEach((item) => {
      if (seen.has(item.name)) this.fail(path, `Duplicate value: ${JSON.stringify(item.name)}: names must be unique`);
      seen.add(item.name);
    });
  }
}

export function describe(v: unknown): string {
  if (Array.isArray(v)) return 'a list';
  if (v === null) return 'null';
  if (typeof v === 'object') return 'an object';
  return JSON.stringify(v);
}
