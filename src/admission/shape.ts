// The shapes of the object slices the cores read. kube-apiserver sends typed objects (a string is
// a string, a list a list, empty fields omitted), any other caller of /mutate may not: a value of
// the wrong type in a field the core reads would throw (an internal error) or yield a patch that
// does not apply to the object. Fields not named here are carried through unread.
import { clip } from '../limits.ts';
import { isObject } from '../model.ts';

export type Shape =
  | 'string'
  | 'boolean'
  | 'integer'
  | { map: 'string' }
  | { list: Shape }
  | { fields: Record<string, Shape>; required?: readonly string[] };

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function expected(shape: Shape): string {
  if (typeof shape === 'string') return `a ${shape}`;
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
  if ('map' in shape) return isStringMap;
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

/** metadata as the cores read it (labels and annotations are map[string]string). */
export const METADATA_SHAPE: Shape = {
  fields: { namespace: 'string', labels: { map: 'string' }, annotations: { map: 'string' } },
};
