// Kubernetes objects read from YAML or JSON files (`preview`, `trust -f`, `check-policy`): the
// documents of every stream, `List` kinds flattened.
import { parseAllDocuments } from 'yaml';
import { WebhookError } from './errors.ts';

export interface ManifestInput {
  /** Each entry: a file's name (for messages) and its text. */
  documents: { source: string; text: string }[];
}

type Manifest = {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; annotations?: Record<string, string> };
  items?: Manifest[];
};

/** Parses YAML or JSON streams (JSON is YAML), flattening `List` kinds. */
export function parseManifests(input: ManifestInput): Manifest[] {
  const out: Manifest[] = [];
  for (const { source, text } of input.documents) {
    for (const doc of parseAllDocuments(text)) {
      if (doc.errors.length > 0) throw new WebhookError('WIW_BAD_INPUT', `${source}: ${doc.errors[0].message}`);
      const value = doc.toJS() as unknown;
      if (value === null || value === undefined) continue;
      if (typeof value !== 'object' || Array.isArray(value))
        throw new WebhookError('WIW_BAD_INPUT', `${source}: a document is not a Kubernetes object`);
      const m = value as Manifest;
      if (m.kind?.endsWith('List') && Array.isArray(m.items)) out.push(...m.items);
      else out.push(m);
    }
  }
  return out;
}
