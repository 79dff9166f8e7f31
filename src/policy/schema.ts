// The parts of the WorkloadIdentityPolicy CRD (charts/workload-identity-webhook/crds/) that follow
// from the clouds: each identity provider's schema (its cloud's declared fields, and the defaults'
// fields with its token bounds), the identity fields of the examples, and the default fields'
// and providers' enums. test/e2e/chart-render.test.ts holds the chart's CRD to exactly these, so a new cloud
// cannot be accepted by a file policy and refused by the API server (or the reverse).
import { cloudModule } from '../clouds/index.ts';
import { cloudFacts, PROVIDER_NAMES, type ProviderName } from '../clouds/registry.ts';
import type { JsonSchema } from '../clouds/types.ts';
import { IDENTITY_FIELDS } from './cel.ts';
import { DEFAULT_FIELD_NAMES } from './model.ts';

/** "aws, azure or gcp", for messages. */
export function orList(names: readonly string[]): string {
  return names.length < 2 ? names.join('') : `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}`;
}

const NAME: JsonSchema = { type: 'string', maxLength: 63, pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' };

/** The static defaults an identity provider of this cloud may carry: region only for clouds with regions. */
export function defaultsSchema(cloud: ProviderName): Record<string, JsonSchema> {
  const facts = cloudFacts(cloud);
  const described = cloudModule(cloud).policy.schema.defaults ?? {};
  const string = (description: string | undefined): JsonSchema =>
    description === undefined ? { type: 'string' } : { type: 'string', description };
  return {
    ...(facts.region ? { region: string(described.region) } : {}),
    audience: string(described.audience),
    tokenExpirationSeconds: { type: 'integer', minimum: facts.tokenBounds.min, maximum: facts.tokenBounds.max },
  };
}

/** spec.identityProviders[]: a name and exactly one cloud's part. */
export function identityProviderSchema(): JsonSchema {
  const clouds: Record<string, JsonSchema> = {};
  for (const name of PROVIDER_NAMES) {
    const { description, required, properties } = cloudModule(name).policy.schema;
    clouds[name] = {
      type: 'object',
      ...(description === undefined ? {} : { description }),
      ...(required === undefined ? {} : { required: [...required] }),
      properties: { ...properties, ...defaultsSchema(name) },
    };
  }
  return {
    type: 'object',
    required: ['name'],
    'x-kubernetes-validations': [
      {
        rule: `${PROVIDER_NAMES.map((name) => `(has(self.${name}) ? 1 : 0)`).join(' + ')} == 1`,
        message: `name exactly one of ${orList(PROVIDER_NAMES)}`,
      },
    ],
    properties: { name: NAME, displayName: { type: 'string', maxLength: 256 }, ...clouds },
  };
}

/** An example's `identity`: every field a policy sees. */
export function identitySchema(): JsonSchema {
  return { type: 'object', properties: Object.fromEntries(IDENTITY_FIELDS.map((f) => [f, { type: 'string' }])) };
}

/** spec.defaults[].field and .providers. */
export function defaultRuleSchemas(): { field: JsonSchema; providers: JsonSchema } {
  return {
    field: { type: 'string', enum: [...DEFAULT_FIELD_NAMES] },
    providers: { type: 'array', items: { type: 'string', enum: [...PROVIDER_NAMES] } },
  };
}
