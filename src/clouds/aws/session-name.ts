// AWS_ROLE_SESSION_NAME (aws/amazon-eks-pod-identity-webhook#112): the Pod's own name through the
// downward API, or a literal, so CloudTrail shows which Pod assumed the role.
import type { EnvVar } from '../../kube/types.ts';

/** STS's RoleSessionName: 2 to 64 of [\w+=,.@-] (AssumeRoleWithWebIdentity's API reference). */
const ROLE_SESSION_NAME = /^[\w+=,.@-]{2,64}$/;
const ROLE_SESSION_NAME_MAX = 64;
/** The value that asks for the Pod's name rather than a literal. */
export const POD_NAME = 'pod-name';

/** What the flag or an annotation asks for: the Pod's name, a literal, or (`none`, a Pod's) nothing. */
export type SessionName = { podName: true } | { literal: string } | { none: true };

/** Reads a value; a string is the reason it is refused (the caller names where it came from). */
export function readSessionName(raw: string, allowNone: boolean): SessionName | string {
  const v = raw.trim();
  if (v === POD_NAME) return { podName: true };
  // `none` turns a flag's value off in an annotation; as the flag's own value it would be a literal.
  if (v === 'none') return allowNone ? { none: true } : 'is reserved for annotations: leave the flag empty instead';
  if (ROLE_SESSION_NAME.test(v)) return { literal: v };
  return `is neither "${POD_NAME}"${allowNone ? ', "none"' : ''} nor an STS RoleSessionName (2 to ${ROLE_SESSION_NAME_MAX} letters, digits and "_+=,.@-")`;
}

/**
 * The env var, or why it is left out. A Pod named by generateName has no name at admission and
 * gets at most 58 characters of prefix and 5 random ones: it always fits. A name known at
 * admission (a DNS subdomain, up to 253 characters, every character STS allows) fits when it is
 * 2 to 64 characters long; a longer one would make the SDKs' AssumeRoleWithWebIdentity fail, so it
 * is left to the SDK's own default session name, with a warning.
 */
export function sessionNameEnv(want: SessionName, podName: string | undefined): EnvVar | string | undefined {
  if ('none' in want) return undefined;
  if ('literal' in want) return { name: 'AWS_ROLE_SESSION_NAME', value: want.literal };
  if (podName && !ROLE_SESSION_NAME.test(podName))
    return `AWS_ROLE_SESSION_NAME is not set from the Pod's name: "${podName}" has ${podName.length} characters and STS takes a RoleSessionName of 2 to ${ROLE_SESSION_NAME_MAX}; the SDKs use their own session name`;
  return {
    name: 'AWS_ROLE_SESSION_NAME',
    valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } },
  };
}
