// Policies from a YAML (or JSON) file: the same WorkloadIdentityPolicy objects as in the cluster,
// for `preview --policy FILE` and for clusters without the CRD (`serve --policy-file`). A file that
// cannot be read as policies is an error; a policy that does not compile is not (it is reported
// and handled like a broken policy in the cluster).
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { ioProblem, WebhookError } from '../errors.ts';
import { compilePolicy } from './compile.ts';
import { POLICY_API_VERSION, POLICY_KIND, type CompileResult, type PolicyDocument } from './model.ts';
import { isObject } from '../model.ts';

export function policyDocumentsFromText(text: string, source: string): PolicyDocument[] {
  const docs: PolicyDocument[] = [];
  const bad = (message: string) => new WebhookError('WIW_BAD_POLICY_FILE', `${source}: ${message}`);
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw bad(doc.errors[0].message);
    const value = doc.toJS() as unknown;
    if (value === null || value === undefined) continue;
    const items =
      isObject(value) && typeof value.kind === 'string' && value.kind.endsWith('List') && Array.isArray(value.items)
        ? value.items
        : [value];
    for (const item of items) {
      if (!isObject(item) || item.kind !== POLICY_KIND || item.apiVersion !== POLICY_API_VERSION) {
        const what = isObject(item)
          ? `${String(item.apiVersion)} ${String(item.kind)}`
          : 'a document that is not an object';
        throw bad(`found ${what}; a policy file holds ${POLICY_API_VERSION} ${POLICY_KIND} objects only`);
      }
      const name = isObject(item.metadata) ? item.metadata.name : undefined;
      if (typeof name !== 'string' || name === '') throw bad(`a ${POLICY_KIND} has no metadata.name`);
      if (docs.some((d) => d.name === name)) throw bad(`two ${POLICY_KIND} objects are named "${name}"`);
      docs.push({ name, generation: 0, source, spec: item.spec });
    }
  }
  return docs;
}

export function loadPolicyFile(path: string): CompileResult[] {
  let text: string;
  try {
    text = readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (err) {
    throw new WebhookError('WIW_BAD_POLICY_FILE', `cannot read policy file ${path}: ${ioProblem(err)}`);
  }
  return policyDocumentsFromText(text, path).map(compilePolicy);
}
