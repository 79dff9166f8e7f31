import { cloudFacts, PROVIDER_NAMES, unknownCloud } from '../clouds/registry.ts';
import { AZURE_CLOUDS, type AzureCloud } from '../clouds/azure/environments.ts';
import { isTenantId } from '../clouds/azure/pod.ts';
import type { ProviderName } from '../clouds/types.ts';
import { IDENTITY_FIELDS } from './cel.ts';
import {
  DEFAULT_FIELDS,
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

/**
 * Reads a policy's spec strictly: unknown fields, wrong types and bad values are problems with
 * the path of the offending field, as the API server words schema errors. The CRD's schema
 * checks the same shapes in a cluster; a file gets them from here.
 */
export function parsePolicySpec(raw: unknown): { spec: PolicySpec } | { problems: PolicyProblem[] } {
  const r = new Reader();
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

const NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const PARTITION = /^aws(-[a-z]+)*$/;
const ACCOUNT = /^\d{12}$/;
const PROJECT_NUMBER = /^\d{1,20}$/;
const POOL = /^[a-z0-9-]{4,32}$/;

class Reader {
  readonly problems: PolicyProblem[] = [];

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
    const s = this.matching(v, path, NAME, 'a lowercase name of letters, digits and "-"', true);
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

function describe(v: unknown): string {
  if (Array.isArray(v)) return 'a list';
  if (v === null) return 'null';
  if (typeof v === 'object') return 'an object';
  return JSON.stringify(v);
}

function identityProvider(r: Reader, v: unknown, path: string): IdentityProviderSpec | undefined {
  const o = r.object(v, path, ['name', 'displayName', ...PROVIDER_NAMES]);
  if (!o) return undefined;
  const name = r.name(o.name, `${path}.name`);
  const displayName = r.string(o.displayName, `${path}.displayName`, false);
  const clouds = PROVIDER_NAMES.filter((c) => o[c] !== undefined && o[c] !== null);
  if (clouds.length !== 1) {
    r.fail(
      path,
      `Invalid value: name exactly one of aws, azure or gcp${clouds.length ? ` (found ${clouds.join(' and ')})` : ''}`,
    );
    return undefined;
  }
  const cloud = clouds[0];
  const cp = `${path}.${cloud}`;
  const before = r.problems.length;
  let spec: Omit<IdentityProviderSpec, 'name' | 'displayName'> | undefined;
  if (cloud === 'aws') {
    const a = r.object(o.aws, cp, ['partition', 'accountIds', 'region', 'audience', 'tokenExpirationSeconds']);
    if (a) {
      spec = {
        provider: 'aws',
        partition:
          r.matching(a.partition, `${cp}.partition`, PARTITION, 'an AWS partition such as aws, aws-cn or aws-us-gov') ??
          'aws',
        accountIds: r.list(a.accountIds, `${cp}.accountIds`, (x, p) =>
          r.matching(x, p, ACCOUNT, 'an AWS account id of 12 digits (quote it in YAML)', true),
        ),
        defaults: defaults(r, a, cp, 'aws'),
      };
    }
  } else if (cloud === 'azure') {
    const a = r.object(o.azure, cp, ['tenantId', 'cloud', 'authorityHost', 'audience', 'tokenExpirationSeconds']);
    if (a) {
      const tenantId = r.string(a.tenantId, `${cp}.tenantId`, true);
      if (tenantId !== undefined && !isTenantId(tenantId))
        r.fail(
          `${cp}.tenantId`,
          `Invalid value: ${JSON.stringify(tenantId)}: a tenant id (GUID) or the tenant's domain`,
        );
      const cloudName = r.string(a.cloud, `${cp}.cloud`, false);
      if (cloudName !== undefined && !(cloudName in AZURE_CLOUDS))
        r.fail(
          `${cp}.cloud`,
          `Unsupported value: ${JSON.stringify(cloudName)}: supported values: ${Object.keys(AZURE_CLOUDS).join(', ')}`,
        );
      const host = r.string(a.authorityHost, `${cp}.authorityHost`, false);
      if (host !== undefined && !isHttpsUrl(host))
        r.fail(
          `${cp}.authorityHost`,
          `Invalid value: ${JSON.stringify(host)}: an https URL such as https://login.microsoftonline.com/`,
        );
      spec = {
        provider: 'azure',
        tenantId: tenantId?.toLowerCase(),
        cloud: (cloudName as AzureCloud | undefined) ?? 'AzurePublicCloud',
        // SDKs join the host and the tenant: keep the trailing slash the clouds' hosts have.
        authorityHost: host === undefined ? undefined : host.endsWith('/') ? host : `${host}/`,
        defaults: defaults(r, a, cp, 'azure'),
      };
    }
  } else if (cloud === 'gcp') {
    const a = r.object(o.gcp, cp, ['projectNumber', 'pool', 'region', 'audience', 'tokenExpirationSeconds']);
    if (a) {
      spec = {
        provider: 'gcp',
        projectNumber: r.matching(
          a.projectNumber,
          `${cp}.projectNumber`,
          PROJECT_NUMBER,
          'the project number (digits, quoted in YAML), not its id',
          true,
        ),
        pool: r.matching(
          a.pool,
          `${cp}.pool`,
          POOL,
          'a workload identity pool id (4 to 32 lowercase letters, digits and "-")',
          true,
        ),
        defaults: defaults(r, a, cp, 'gcp'),
      };
    }
  } else {
    unknownCloud(cloud);
  }
  if (!spec || name === undefined || r.problems.length > before) return undefined;
  return { name, displayName: displayName?.trim() || name, ...spec };
}

function defaults(r: Reader, o: Record<string, unknown>, path: string, cloud: ProviderName): ProviderDefaults {
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

function isHttpsUrl(s: string): boolean {
  try {
    return new URL(s).protocol === 'https:';
  } catch {
    return false;
  }
}

function validation(r: Reader, v: unknown, path: string): ValidationSpec | undefined {
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

function defaultRule(r: Reader, v: unknown, path: string): DefaultSpec | undefined {
  const o = r.object(v, path, ['name', 'field', 'providers', 'expression', 'examples']);
  if (!o) return undefined;
  const name = r.name(o.name, `${path}.name`);
  const fieldName = r.string(o.field, `${path}.field`, true);
  let field: DefaultField | undefined;
  if (fieldName !== undefined) {
    if (fieldName in DEFAULT_FIELDS) field = fieldName as DefaultField;
    else
      r.fail(
        `${path}.field`,
        `Unsupported value: ${JSON.stringify(fieldName)}: supported values: ${Object.keys(DEFAULT_FIELDS).join(', ')}`,
      );
  }
  const applicable: readonly ProviderName[] = field ? DEFAULT_FIELDS[field] : [];
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
  r: Reader,
  v: unknown,
  path: string,
): { name: string; input: ExampleInput; expect: unknown } | undefined {
  const o = r.object(v, path, ['name', 'namespaceObject', 'serviceAccount', 'object', 'identity', 'expect']);
  if (!o) return undefined;
  const before = r.problems.length;
  const name = r.string(o.name, `${path}.name`, true);
  const input: ExampleInput = {};
  if (o.namespaceObject !== undefined) {
    const ns = r.object(o.namespaceObject, `${path}.namespaceObject`, ['metadata']);
    const m =
      ns && ns.metadata !== undefined
        ? r.object(ns.metadata, `${path}.namespaceObject.metadata`, ['name', 'labels'])
        : undefined;
    input.namespaceObject = {
      metadata: {
        name: r.string(m?.name, `${path}.namespaceObject.metadata.name`, false),
        labels: r.stringMap(m?.labels, `${path}.namespaceObject.metadata.labels`),
      },
    };
  }
  if (o.serviceAccount !== undefined) {
    const sa = r.object(o.serviceAccount, `${path}.serviceAccount`, ['metadata']);
    const m =
      sa && sa.metadata !== undefined
        ? r.object(sa.metadata, `${path}.serviceAccount.metadata`, ['name', 'namespace', 'annotations'])
        : undefined;
    input.serviceAccount = {
      metadata: {
        name: r.string(m?.name, `${path}.serviceAccount.metadata.name`, false),
        namespace: r.string(m?.namespace, `${path}.serviceAccount.metadata.namespace`, false),
        annotations: r.stringMap(m?.annotations, `${path}.serviceAccount.metadata.annotations`),
      },
    };
  }
  if (o.object !== undefined) {
    const obj = r.object(o.object, `${path}.object`, ['apiVersion', 'kind', 'metadata']);
    const m =
      obj && obj.metadata !== undefined
        ? r.object(obj.metadata, `${path}.object.metadata`, [
            'name',
            'generateName',
            'namespace',
            'labels',
            'annotations',
          ])
        : undefined;
    const kind = r.string(obj?.kind, `${path}.object.kind`, false);
    if (kind !== undefined && kind !== 'Pod' && kind !== 'Secret')
      r.fail(`${path}.object.kind`, `Unsupported value: ${JSON.stringify(kind)}: supported values: Pod, Secret`);
    input.object = {
      apiVersion: r.string(obj?.apiVersion, `${path}.object.apiVersion`, false),
      kind,
      metadata: m && {
        name: r.string(m.name, `${path}.object.metadata.name`, false),
        generateName: r.string(m.generateName, `${path}.object.metadata.generateName`, false),
        namespace: r.string(m.namespace, `${path}.object.metadata.namespace`, false),
        labels: r.stringMap(m.labels, `${path}.object.metadata.labels`),
        annotations: r.stringMap(m.annotations, `${path}.object.metadata.annotations`),
      },
    };
  }
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
