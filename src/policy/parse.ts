// Reads a policy's spec strictly: unknown fields, wrong types and bad values are problems with
// the path of the offending field, as the API server words schema errors. The CRD's schema checks
// the same shapes in a cluster; a file gets them from here. Each cloud reads its own identity
// providers' fields (clouds/<cloud>/policy.ts).
import { cloudModule } from '../clouds/index.ts';
import { cloudFacts, PROVIDER_NAMES, type ProviderName } from '../clouds/registry.ts';
import { IDENTITY_FIELDS } from './cel.ts';
import { describe, SpecReader } from '../spec-reader.ts';
import { defaultsSchema, orList } from './schema.ts';
import {
  DEFAULT_FIELD_NAMES,
  type DefaultExample,
  type DefaultField,
  type DefaultSpec,
  type ExampleInput,
  type IdentityProviderSpec,
  type PolicyProblem,
  type PolicySpec,
  type ProviderDefaults,
  type ValidationExample,
  type ValidationSpec,
} from './model.ts';

export function parsePolicySpec(raw: unknown): { spec: PolicySpec } | { problems: PolicyProblem[] } {
  const r = new SpecReader();
  const spec: PolicySpec = { identityProviders: [], validations: [], defaults: [] };
  const root = r.object(raw, 'spec', ['identityProviders', 'validations', 'defaults']);
  if (root) {
    spec.identityProviders = r.list(root.identityProviders, 'spec.identityProviders', (v, p) =>
      identityProvider(r, v, p),
    );
    r.unique(spec.identityProviders, 'spec.identityProviders');
    spec.validations = r.list(root.validations, 'spec.validations', (v, p) => validation(r, v, p));
    r.unique(spec.validations, 'spec.validations');
    spec.defaults = r.list(root.defaults, 'spec.defaults', (v, p) => defaultRule(r, v, p));
    r.unique(spec.defaults, 'spec.defaults');
  }
  return r.problems.length > 0 ? { problems: r.problems } : { spec };
}

function identityProvider(r: SpecReader, v: unknown, path: string): IdentityProviderSpec | undefined {
  const o = r.object(v, path, ['name', 'displayName', ...PROVIDER_NAMES]);
  if (!o) return undefined;
  const name = r.name(o.name, `${path}.name`);
  const displayName = r.string(o.displayName, `${path}.displayName`, false);
  const clouds = PROVIDER_NAMES.filter((c) => o[c] !== undefined && o[c] !== null);
  if (clouds.length !== 1) {
    r.fail(
      path,
      `Invalid value: name exactly one of ${orList(PROVIDER_NAMES)}${clouds.length ? ` (found ${clouds.join(' and ')})` : ''}`,
    );
    return undefined;
  }
  const cloud = clouds[0];
  const cp = `${path}.${cloud}`;
  const before = r.problems.length;
  const a = r.object(o[cloud], cp, [
    ...Object.keys(cloudModule(cloud).policy.schema.properties),
    ...Object.keys(defaultsSchema(cloud)),
  ]);
  if (!a) return undefined;
  const declared = cloudModule(cloud).policy.parseDeclared(r, a, cp);
  const providerDefaults = defaults(r, a, cp, cloud);
  if (name === undefined || r.problems.length > before) return undefined;
  return {
    name,
    displayName: displayName?.trim() || name,
    provider: cloud,
    ...declared,
    defaults: providerDefaults,
  } as IdentityProviderSpec;
}

/** The clouds a computed default field applies to: region to clouds with regions, tenant to those that take one. */
function cloudsOfField(field: DefaultField): ProviderName[] {
  if (field === 'region') return PROVIDER_NAMES.filter((c) => cloudFacts(c).region);
  if (field === 'tenant') return PROVIDER_NAMES.filter((c) => cloudFacts(c).tenant);
  return PROVIDER_NAMES;
}

function defaults(r: SpecReader, o: Record<string, unknown>, path: string, cloud: ProviderName): ProviderDefaults {
  const facts = cloudFacts(cloud);
  const d: ProviderDefaults = {};
  // r.object admitted 'region' only for clouds that have one.
  if ('region' in o && facts.region) {
    const region = r.matching(
      o.region,
      `${path}.region`,
      facts.region.pattern,
      `${facts.region.what} such as ${facts.region.example}`,
    );
    if (region !== undefined) d.region = region;
  }
  const audience = r.string(o.audience, `${path}.audience`, false);
  if (audience !== undefined) {
    if (audience.trim() === '' || /\s/.test(audience))
      r.fail(`${path}.audience`, `Invalid value: ${JSON.stringify(audience)}: an audience without spaces`);
    else d.audience = audience;
  }
  const exp = r.integer(
    o.tokenExpirationSeconds,
    `${path}.tokenExpirationSeconds`,
    facts.tokenBounds.min,
    facts.tokenBounds.max,
  );
  if (exp !== undefined) d.tokenExpirationSeconds = exp;
  return d;
}

function validation(r: SpecReader, v: unknown, path: string): ValidationSpec | undefined {
  const o = r.object(v, path, ['name', 'expression', 'message', 'messageExpression', 'examples']);
  if (!o) return undefined;
  const name = r.name(o.name, `${path}.name`);
  const expression = r.string(o.expression, `${path}.expression`, true);
  const message = r.string(o.message, `${path}.message`, false);
  const messageExpression = r.string(o.messageExpression, `${path}.messageExpression`, false);
  const examples = r.list(o.examples, `${path}.examples`, (x, p) => {
    const e = example(r, x, p);
    if (!e) return undefined;
    const expect = r.object(e.expect, `${p}.expect`, ['allowed', 'message']);
    if (!expect) return undefined;
    const allowed = r.boolean(expect.allowed, `${p}.expect.allowed`);
    const msg = r.string(expect.message, `${p}.expect.message`, false);
    if (allowed === undefined) return undefined;
    if (allowed && msg !== undefined)
      return r.fail(`${p}.expect.message`, 'Forbidden: a message is expected only when allowed is false');
    return {
      name: e.name,
      input: e.input,
      expect: msg === undefined ? { allowed } : { allowed, message: msg },
    } satisfies ValidationExample;
  });
  r.unique(examples, `${path}.examples`);
  if (name === undefined || expression === undefined) return undefined;
  return {
    name,
    expression,
    // As ValidatingAdmissionPolicy words it when no message is given.
    message: message?.trim() || `failed expression: ${expression.trim()}`,
    ...(messageExpression !== undefined ? { messageExpression } : {}),
    examples,
  };
}

function defaultRule(r: SpecReader, v: unknown, path: string): DefaultSpec | undefined {
  const o = r.object(v, path, ['name', 'field', 'providers', 'expression', 'examples']);
  if (!o) return undefined;
  const name = r.name(o.name, `${path}.name`);
  const fieldName = r.string(o.field, `${path}.field`, true);
  let field: DefaultField | undefined;
  if (fieldName !== undefined) {
    if ((DEFAULT_FIELD_NAMES as readonly string[]).includes(fieldName)) field = fieldName as DefaultField;
    else
      r.fail(
        `${path}.field`,
        `Unsupported value: ${JSON.stringify(fieldName)}: supported values: ${DEFAULT_FIELD_NAMES.join(', ')}`,
      );
  }
  const applicable: readonly ProviderName[] = field ? cloudsOfField(field) : [];
  let providers = [...applicable];
  if (o.providers !== undefined && field) {
    providers = r.list(o.providers, `${path}.providers`, (x, p) => {
      const s = r.string(x, p, true);
      if (s === undefined) return undefined;
      if (!(applicable as readonly string[]).includes(s))
        return r.fail(p, `Unsupported value: ${JSON.stringify(s)}: ${field} applies to ${applicable.join(', ')}`);
      return s as ProviderName;
    });
  }
  const expression = r.string(o.expression, `${path}.expression`, true);
  const examples = r.list(o.examples, `${path}.examples`, (x, p) => {
    const e = example(r, x, p);
    if (!e) return undefined;
    const expect = r.object(e.expect, `${p}.expect`, ['value']);
    if (!expect) return undefined;
    if (!('value' in expect))
      return r.fail(`${p}.expect.value`, 'Required value: the value the default gives (null for none)');
    const value = expect.value;
    if (value !== null && typeof value !== 'string' && !(typeof value === 'number' && Number.isInteger(value))) {
      return r.fail(`${p}.expect.value`, `Invalid value: ${describe(value)}: a string, a whole number or null`);
    }
    return { name: e.name, input: e.input, expect: { value } } satisfies DefaultExample;
  });
  r.unique(examples, `${path}.examples`);
  if (name === undefined || field === undefined || expression === undefined) return undefined;
  return { name, field, providers, expression, examples };
}

/** An example's name and sample input; the caller reads `expect`. */
function example(
  r: SpecReader,
  v: unknown,
  path: string,
): { name: string; input: ExampleInput; expect: unknown } | undefined {
  const o = r.object(v, path, ['name', 'namespaceObject', 'serviceAccount', 'object', 'identity', 'expect']);
  if (!o) return undefined;
  const before = r.problems.length;
  const name = r.string(o.name, `${path}.name`, true);
  const input: ExampleInput = {};
  if (o.namespaceObject !== undefined) input.namespaceObject = exampleNamespace(r, o.namespaceObject, path);
  if (o.serviceAccount !== undefined) input.serviceAccount = exampleServiceAccount(r, o.serviceAccount, path);
  if (o.object !== undefined) input.object = exampleObject(r, o.object, path);
  if (o.identity !== undefined) {
    const id = r.object(o.identity, `${path}.identity`, IDENTITY_FIELDS);
    if (id) {
      for (const [k, x] of Object.entries(id))
        if ((IDENTITY_FIELDS as readonly string[]).includes(k)) r.string(x, `${path}.identity.${k}`, false);
      input.identity = id as Partial<Record<string, string>>;
    }
  }
  if (o.expect === undefined) r.fail(`${path}.expect`, 'Required value: the expected outcome');
  if (name === undefined || r.problems.length > before) return undefined;
  return { name, input, expect: o.expect };
}

/** The metadata object at `at` of an example's object, its keys limited to `keys`. */
function exampleMetadata(r: SpecReader, parent: Record<string, unknown> | undefined, at: string, keys: string[]) {
  return parent && parent.metadata !== undefined ? r.object(parent.metadata, `${at}.metadata`, keys) : undefined;
}

function exampleNamespace(r: SpecReader, v: unknown, path: string): ExampleInput['namespaceObject'] {
  const at = `${path}.namespaceObject`;
  const m = exampleMetadata(r, r.object(v, at, ['metadata']), at, ['name', 'labels']);
  return {
    metadata: {
      name: r.string(m?.name, `${at}.metadata.name`, false),
      labels: r.stringMap(m?.labels, `${at}.metadata.labels`),
    },
  };
}

function exampleServiceAccount(r: SpecReader, v: unknown, path: string): ExampleInput['serviceAccount'] {
  const at = `${path}.serviceAccount`;
  const m = exampleMetadata(r, r.object(v, at, ['metadata']), at, ['name', 'namespace', 'annotations']);
  return {
    metadata: {
      name: r.string(m?.name, `${at}.metadata.name`, false),
      namespace: r.string(m?.namespace, `${at}.metadata.namespace`, false),
      annotations: r.stringMap(m?.annotations, `${at}.metadata.annotations`),
    },
  };
}

function exampleObject(r: SpecReader, v: unknown, path: string): ExampleInput['object'] {
  const at = `${path}.object`;
  const obj = r.object(v, at, ['apiVersion', 'kind', 'metadata']);
  const m = exampleMetadata(r, obj, at, ['name', 'generateName', 'namespace', 'labels', 'annotations']);
  const kind = r.string(obj?.kind, `${at}.kind`, false);
  if (kind !== undefined && kind !== 'Pod' && kind !== 'Secret')
    r.fail(`${at}.kind`, `Unsupported value: ${JSON.stringify(kind)}: supported values: Pod, Secret`);
  return {
    apiVersion: r.string(obj?.apiVersion, `${at}.apiVersion`, false),
    kind,
    metadata: m && {
      name: r.string(m.name, `${at}.metadata.name`, false),
      generateName: r.string(m.generateName, `${at}.metadata.generateName`, false),
      namespace: r.string(m.namespace, `${at}.metadata.namespace`, false),
      labels: r.stringMap(m.labels, `${at}.metadata.labels`),
      annotations: r.stringMap(m.annotations, `${at}.metadata.annotations`),
    },
  };
}
