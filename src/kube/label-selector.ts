// A label selector (metav1.LabelSelector) judged against labels as the API server judges a
// webhook's namespaceSelector and objectSelector: matchLabels and matchExpressions are ANDed; an
// absent or empty selector selects everything.

interface LabelSelectorRequirement {
  key: string;
  operator: string;
  values?: readonly string[];
}

export interface LabelSelector {
  matchLabels?: Readonly<Record<string, string>>;
  matchExpressions?: readonly LabelSelectorRequirement[];
}

export function selects(selector: LabelSelector | undefined | null, labels: Readonly<Record<string, string>>): boolean {
  if (!selector) return true;
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) if (labels[key] !== value) return false;
  return (selector.matchExpressions ?? []).every((r) => requirementHolds(r, labels));
}

function requirementHolds(r: LabelSelectorRequirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.hasOwn(labels, r.key);
  const values = r.values ?? [];
  switch (r.operator) {
    case 'In':
      return has && values.includes(labels[r.key]);
    case 'NotIn':
      return !has || !values.includes(labels[r.key]);
    case 'Exists':
      return has;
    case 'DoesNotExist':
      return !has;
    default:
      // The API server refuses any other operator when the selector is stored.
      return false;
  }
}
