// The chart's alerts and dashboard as the tests read them: the rendered PrometheusRule's groups,
// every query of the dashboard made parseable, and the metric names a /metrics page exports.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHART, find, renderChart } from './chart.ts';

export const DASHBOARD_FILE = join(CHART, 'files/dashboards/workload-identity-webhook.json');

export interface RenderedRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** The PrometheusRule's groups as the chart renders them with these values (prometheusRule enabled). */
export async function renderedRuleGroups(
  values: Record<string, any> = {},
): Promise<{ name: string; rules: RenderedRule[] }[]> {
  const { manifests } = await renderChart({
    ...values,
    prometheusRule: {
      enabled: true,
      runbookUrl: 'https://docs.example.com/observability.md',
      ...values.prometheusRule,
    },
  });
  const rule = find(manifests, 'PrometheusRule');
  if (!rule) throw new Error('no PrometheusRule rendered');
  return rule.spec.groups;
}

/** Values of Grafana's variables, so a dashboard query becomes plain PromQL. */
const GRAFANA_VARIABLES: Record<string, string> = {
  __rate_interval: '5m',
  __interval: '1m',
  __range: '6h',
  namespace: 'wiw-system',
  job: '.+',
};

function substitute(query: string): string {
  return query.replace(/\$\{?(\w+)\}?/g, (whole, name: string) => {
    const value = GRAFANA_VARIABLES[name];
    if (value === undefined) throw new Error(`dashboard query ${query}: unknown variable ${whole}`);
    return value;
  });
}

/**
 * Every PromQL query of the dashboard with its variables substituted: the panels' targets and the
 * series selectors of the variables' label_values() queries. `where` names the panel or variable.
 */
export function dashboardQueries(): { where: string; expr: string }[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Record<string, any>;
  const out: { where: string; expr: string }[] = [];
  const walk = (panels: Record<string, any>[]) => {
    for (const panel of panels) {
      for (const target of panel.targets ?? [])
        out.push({ where: `panel "${panel.title}"`, expr: substitute(target.expr) });
      walk(panel.panels ?? []);
    }
  };
  walk(dashboard.panels);
  for (const variable of dashboard.templating.list) {
    if (variable.type !== 'query') continue;
    const query = typeof variable.query === 'string' ? variable.query : variable.query.query;
    const selector = /^label_values\((.+),\s*\w+\)$/.exec(query)?.[1];
    if (!selector)
      throw new Error(`variable ${variable.name}: only label_values(selector, label) is understood: ${query}`);
    out.push({ where: `variable ${variable.name}`, expr: substitute(selector) });
  }
  return out;
}

/**
 * The metric names a Prometheus text exposition exports, as series names a query can select: a
 * histogram's _bucket, _sum and _count, a summary's quantiles, _sum and _count.
 */
export function exportedNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
    else if (type === 'summary') for (const suffix of ['', '_sum', '_count']) names.add(name + suffix);
    else names.add(name);
  }
  return names;
}
