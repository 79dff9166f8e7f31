import type { DeclaredOf } from '../clouds/index.ts';
import type { ProviderName } from '../clouds/registry.ts';
import type { IdentityVariable, Program } from './cel.ts';
import type { SpecProblem } from '../spec-reader.ts';

/** The custom resource: cluster-scoped, one object per policy (charts/workload-identity-webhook/crds/). */
export const POLICY_GROUP = 'workload-identity-webhook.io';
export const POLICY_VERSION = 'v1alpha1';
export const POLICY_API_VERSION = `${POLICY_GROUP}/${POLICY_VERSION}`;
export const POLICY_KIND = 'WorkloadIdentityPolicy';
export const POLICY_PLURAL = 'workloadidentitypolicies';

/**
 * A cloud identity provider the cluster trusts, with the defaults that replace the global flags
 * for it; the rest of its fields are its cloud's (clouds/<cloud>/policy.ts).
 */
export type IdentityProviderSpec = {
  [K in ProviderName]: {
    name: string;
    displayName: string;
    provider: K;
  } & DeclaredOf<K> & { defaults: ProviderDefaults };
}[ProviderName];

export interface ProviderDefaults {
  region?: string;
  audience?: string;
  tokenExpirationSeconds?: number;
}

/** Fields a CEL default may compute (each cloud takes those that mean something to it: parse.ts). */
export const DEFAULT_FIELD_NAMES = ['region', 'tenant', 'audience', 'tokenExpirationSeconds'] as const;
export type DefaultField = (typeof DEFAULT_FIELD_NAMES)[number];

/** Sample input of an example; anything left out is empty. */
export interface ExampleInput {
  namespaceObject?: { metadata?: { name?: string; labels?: Record<string, string> } };
  serviceAccount?: { metadata?: { name?: string; namespace?: string; annotations?: Record<string, string> } };
  object?: { apiVersion?: string; kind?: string; metadata?: Record<string, unknown> };
  identity?: Partial<IdentityVariable>;
}

export interface ValidationExample {
  name: string;
  input: ExampleInput;
  expect: { allowed: boolean; message?: string };
}

export interface DefaultExample {
  name: string;
  input: ExampleInput;
  /** null: the default gives nothing for this input. */
  expect: { value: string | number | null };
}

export interface ValidationSpec {
  name: string;
  expression: string;
  message: string;
  messageExpression?: string;
  examples: ValidationExample[];
}

export interface DefaultSpec {
  name: string;
  field: DefaultField;
  providers: ProviderName[];
  expression: string;
  examples: DefaultExample[];
}

export interface PolicySpec {
  identityProviders: IdentityProviderSpec[];
  validations: ValidationSpec[];
  defaults: DefaultSpec[];
}

/** One object, as read from the cluster or a file, before compilation. */
export interface PolicyDocument {
  name: string;
  /** metadata.generation in the cluster; 0 for a file. */
  generation: number;
  /** Where it came from, for messages: "cluster" or a file path. */
  source: string;
  spec: unknown;
}

/** Why a policy is not used: a path into the object and what is wrong there (its spec, or its CEL). */
export type PolicyProblem =
  | SpecProblem
  | {
      reason: 'CompileError' | 'ExampleFailed';
      path: string;
      message: string;
    };

export interface CompiledValidation {
  name: string;
  program: Program;
  message: string;
  messageProgram?: Program;
}

export interface CompiledDefault {
  name: string;
  field: DefaultField;
  providers: ReadonlySet<ProviderName>;
  program: Program;
}

/** A policy ready for admission: plain data and compiled programs, no I/O. */
export interface CompiledPolicy {
  name: string;
  generation: number;
  source: string;
  identityProviders: IdentityProviderSpec[];
  validations: CompiledValidation[];
  defaults: CompiledDefault[];
  examples: number;
}

interface CompileOutcome {
  name: string;
  generation: number;
  source: string;
  /** Examples in the spec (all run when the expressions compiled). */
  examples: number;
}
export type CompileResult =
  | (CompileOutcome & { ok: true; policy: CompiledPolicy })
  | (CompileOutcome & { ok: false; problems: PolicyProblem[] });
