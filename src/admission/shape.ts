// The shapes of the object slices the cores read. kube-apiserver sends typed objects (a string is
// a string, a list a list, empty fields omitted), any other caller of /mutate may not: a value of
// the wrong type in a field the core reads would throw (an internal error) or yield a patch that
// does not apply to the object. A string or map the core reads has a size too (src/bounds.ts): a
// Pod reaches a mutating webhook before kube-apiserver validates it, so a name of 900 KB does.
// Fields not named here are carried through unread.
import {
  annotationsBytes,
  MAX_ANNOTATIONS_BYTES,
  MAX_DNS_LABEL,
  MAX_DNS_SUBDOMAIN,
  MAX_LABEL_VALUE,
} from '../bounds.ts';
import { clip } from '../text.ts';
import { isObject } from '../model.ts';

export type Shape =
  | 'string'
  | 'boolean'
  | 'integer'
  /** A string of at most `max` characters; `what` names the bound in messages ("a DNS-1123 label"). */
  | { max: number; what: string }
  /**
   * A map of strings; `maxBytes` bounds its keys and values together, as kube-apiserver counts
   * annotations; `maxValue` each value, as it bounds labels'.
   */
  | { map: 'string'; maxBytes?: number; maxValue?: number }
  | { list: Shape }
  | { fields: Record<string, Shape>; required?: readonly string[] };

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function expected(shape: Shape): string {
  if (typeof shape === 'string') return `a ${shape}`;
  if ('max' in shape) return 'a string';
  if ('map' in shape) return 'a map of strings';
  if ('list' in shape) return 'a list';
  return 'an object';
}

const join = (path: string, key: string) => (path ? `${path}.${key}` : key);

/**
 * The first place where `value` is not of `shape`, named by its path; undefined when it is all of
 * it. Every review is checked: a check compiled once per shape, that builds no strings, answers
 * first, and only an object that fails it is walked again for the message.
 */
export function shapeError(value: unknown, shape: Shape, path: string): string | undefined {
  return checkOf(shape)(value) ? undefined : firstError(value, shape, path);
}

type Check = (value: unknown) => boolean;
const compiled = new WeakMap<Exclude<Shape, string>, Check>();
const isString: Check = (v) => typeof v === 'string';
const isBoolean: Check = (v) => typeof v === 'boolean';

/** The shape as a closure: no dispatch on the shape's kind and no walk of its keys per value. */
function checkOf(shape: Shape): Check {
  if (shape === 'string') return isString;
  if (shape === 'boolean') return isBoolean;
  if (shape === 'integer') return Number.isSafeInteger;
  let check = compiled.get(shape);
  if (!check) {
    check = compile(shape);
    compiled.set(shape, check);
  }
  return check;
}

function compile(shape: Exclude<Shape, string>): Check {
  if ('max' in shape) return (value) => typeof value === 'string' && value.length <= shape.max;
  if ('map' in shape) {
    const { maxBytes = Number.POSITIVE_INFINITY, maxValue } = shape;
    if (maxValue === undefined && maxBytes === Number.POSITIVE_INFINITY) return isStringMap;
    return (value) =>
      isStringMap(value) &&
      (maxValue === undefined || valuesWithin(value, maxValue)) &&
      (maxBytes === Number.POSITIVE_INFINITY || annotationsBytes(value as Record<string, string>) <= maxBytes);
  }
  if ('list' in shape) {
    const item = checkOf(shape.list);
    return (value) => Array.isArray(value) && value.every(item);
  }
  const required = shape.required ?? [];
  // One load per field stands for Object.hasOwn and a load: no field is named as an inherited one.
  const inherited = [...required, ...Object.keys(shape.fields)].find((key) => key in Object.prototype);
  if (inherited !== undefined) throw new Error(`a shape field is named ${inherited}, as an inherited property`);
  const fields = Object.entries(shape.fields).map(([key, inner]) => [key, checkOf(inner)] as const);
  return (value) => {
    if (!isObject(value)) return false;
    for (const key of required) if (value[key] === undefined) return false;
    for (const [key, check] of fields) {
      const field = value[key];
      if (field !== undefined && !check(field)) return false;
    }
    return true;
  };
}

function valuesWithin(value: unknown, max: number): boolean {
  const map = value as Record<string, string>;
  for (const key in map) if (Object.hasOwn(map, key) && map[key].length > max) return false;
  return true;
}

function isStringMap(value: unknown): boolean {
  if (!isObject(value)) return false;
  for (const key in value) if (Object.hasOwn(value, key) && typeof value[key] !== 'string') return false;
  return true;
}

function firstError(value: unknown, shape: Shape, path: string): string | undefined {
  const wrong = () => `${path} is not ${expected(shape)} (${describe(value)})`;
  if (shape === 'string') return typeof value === 'string' ? undefined : wrong();
  if (shape === 'boolean') return typeof value === 'boolean' ? undefined : wrong();
  if (shape === 'integer') return Number.isSafeInteger(value) ? undefined : wrong();
  if ('max' in shape) {
    if (typeof value !== 'string') return wrong();
    return value.length <= shape.max
      ? undefined
      : `${path} is ${value.length} characters long, more than the ${shape.max} of ${shape.what}`;
  }
  if ('list' in shape) {
    if (!Array.isArray(value)) return wrong();
    for (let i = 0; i < value.length; i++) {
      const error = firstError(value[i], shape.list, `${path}[${i}]`);
      if (error) return error;
    }
    return undefined;
  }
  if (!isObject(value)) return wrong();
  if ('map' in shape) {
    for (const key of Object.keys(value))
      if (typeof value[key] !== 'string')
        return `${path}[${JSON.stringify(clip(key, 63))}] is not a string (${describe(value[key])})`;
    const max = shape.maxValue;
    const long = max === undefined ? undefined : Object.keys(value).find((k) => (value[k] as string).length > max);
    if (long !== undefined)
      return `${path}[${JSON.stringify(clip(long, 63))}] is ${(value[long] as string).length} characters long, more than the ${shape.maxValue} of a label value`;
    const bytes = annotationsBytes(value as Record<string, string>);
    if (shape.maxBytes !== undefined && bytes > shape.maxBytes)
      return `${path} hold ${bytes} bytes (keys and values), more than kube-apiserver's limit of ${shape.maxBytes}`;
    return undefined;
  }
  for (const key of shape.required ?? []) if (!Object.hasOwn(value, key)) return `${join(path, key)} is missing`;
  for (const [key, inner] of Object.entries(shape.fields)) {
    if (!Object.hasOwn(value, key)) continue;
    const error = firstError(value[key], inner, join(path, key));
    if (error) return error;
  }
  return undefined;
}

/** A container's or a volume's name. */
export const DNS_LABEL: Shape = { max: MAX_DNS_LABEL, what: 'a DNS-1123 label' };
/** An object's name (a ServiceAccount's). */
export const DNS_SUBDOMAIN: Shape = { max: MAX_DNS_SUBDOMAIN, what: 'a DNS-1123 subdomain' };

/**
 * metadata as the cores read it (labels and annotations are map[string]string), no larger than
 * kube-apiserver stores: label values of 63 characters, 256 KiB of annotations (which also bounds
 * any one annotation).
 */
export const METADATA_SHAPE: Shape = {
  fields: {
    namespace: 'string',
    labels: { map: 'string', maxValue: MAX_LABEL_VALUE },
    annotations: { map: 'string', maxBytes: MAX_ANNOTATIONS_BYTES },
  },
};
