// The project of a ServiceAccount's workloads, named outright (pfnet PR #138's
// `cloud.google.com/project-id`): direct resource access has no service account email to read
// it from, and the one read from an email may not be the project the workloads use.
import { denial, type Denial } from '../../errors.ts';
import { PROJECT_ID_PART } from './facts.ts';

export const PROJECT_ID_ANNOTATION = 'cloud.google.com/project-id';

// A project id, or a legacy domain-scoped one (example.com:project).
const PROJECT_ID = new RegExp(`^(?:[a-z0-9][a-z0-9.-]{0,61}[a-z0-9]:)?${PROJECT_ID_PART}$`);

/** The annotated project, undefined without the annotation; a malformed one is refused. */
export function projectIdOf(
  annotations: Readonly<Record<string, string>>,
  saName: string,
): string | undefined | Denial {
  const raw = annotations[PROJECT_ID_ANNOTATION];
  if (raw === undefined) return undefined;
  const value = raw.trim();
  if (PROJECT_ID.test(value)) return value;
  return denial(
    'InvalidAnnotation',
    `${saName} annotation ${PROJECT_ID_ANNOTATION}="${raw}" is not a project id: 6 to 30 lower-case letters, digits and "-", starting with a letter, such as my-project (the id, not the project number)`,
  );
}
