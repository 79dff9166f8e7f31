// The Helm chart without a cluster: metrics, alerts and the dashboard. The Services and
// ServiceMonitors over both Deployments, the PrometheusRule's alerts with their thresholds and
// runbook links, and the Grafana dashboard ConfigMap.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { CHART, FULLNAME, all, find, renderChart } from '../support/chart.ts';

const WEBHOOK_ALERTS = [
  'WorkloadIdentityWebhookErrors',
  'WorkloadIdentityWebhookDenialsRising',
  'WorkloadIdentityWebhookRequestsRejected',
  'WorkloadIdentityWebhookCacheMissReadsFailing',
  'WorkloadIdentityWebhookWatchRestarting',
  'WorkloadIdentityWebhookCertificateExpiring',
  'WorkloadIdentityWebhookSlowAdmissions',
];
const REQUESTOR_ALERTS = ['WorkloadIdentityTokenRequestorFailing', 'WorkloadIdentityTokenRequestorNoLeader'];

describe('metrics, alerts and the dashboard', () => {
  const RUNBOOK = 'https://docs.example.com/observability.md';

  test("the token requestor's metrics: a Service over its replicas, and a ServiceMonitor with the webhook's", async () => {
    const values = { tokenRequestor: { enabled: true, namespaces: ['apps'] }, serviceMonitor: { enabled: true } };
    const { manifests } = await renderChart(values);
    const name = `${FULLNAME}-token-requestor`;
    const service = find(manifests, 'Service', name)!;
    const deployment = find(manifests, 'Deployment', name)!;
    assert.deepEqual(service.spec.selector, deployment.spec.selector.matchLabels);
    assert.deepEqual(service.spec.ports, [{ name: 'metrics', port: 9090, targetPort: 'metrics', protocol: 'TCP' }]);
    assert.equal(deployment.spec.template.spec.containers[0].ports[0].name, 'metrics');
    const monitors = all(manifests, 'ServiceMonitor');
    assert.deepEqual(
      monitors.map((m) => m.metadata.name),
      [FULLNAME, name],
    );
    // Each ServiceMonitor selects its own Service, and only that one.
    for (const [monitor, svc] of [
      [monitors[0], find(manifests, 'Service', FULLNAME)!],
      [monitors[1], service],
    ]) {
      const matches = all(manifests, 'Service').filter((s) =>
        Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => s.metadata.labels?.[k] === v),
      );
      assert.deepEqual(
        matches.map((s) => s.metadata.name),
        [svc.metadata.name],
      );
    }
    const off = (await renderChart({ ...values, metrics: { enabled: false }, serviceMonitor: { enabled: false } }))
      .manifests;
    assert.equal(find(off, 'Service', name), undefined);
    assert.deepEqual(
      all((await renderChart({ tokenRequestor: values.tokenRequestor })).manifests, 'ServiceMonitor'),
      [],
    );
  });

  test('the PrometheusRule is opt-in; its thresholds, selector and labels come from the values', async () => {
    assert.equal(find((await renderChart({})).manifests, 'PrometheusRule'), undefined);
    const rule = find(
      (
        await renderChart({
          prometheusRule: {
            enabled: true,
            runbookUrl: RUNBOOK,
            labels: { release: 'prometheus' },
            alertLabels: { team: 'platform' },
            denialRatio: 0.25,
            certificateExpiryDays: 30,
            latencyTimeoutRatio: 0.8,
          },
          webhook: { timeoutSeconds: 5 },
        })
      ).manifests,
      'PrometheusRule',
    )!;
    assert.equal(rule.metadata.labels!.release, 'prometheus');
    const rules = rule.spec.groups[0].rules as {
      alert: string;
      expr: string;
      labels: Record<string, string>;
      annotations: Record<string, string>;
    }[];
    const byName = Object.fromEntries(rules.map((r) => [r.alert, r]));
    assert.deepEqual(Object.keys(byName), WEBHOOK_ALERTS, 'without the token requestor, none of its alerts');
    assert.match(byName.WorkloadIdentityWebhookDenialsRising.expr, />\s*0\.25$/);
    assert.match(byName.WorkloadIdentityWebhookCertificateExpiring.expr, /< 2592000$/);
    assert.match(byName.WorkloadIdentityWebhookSlowAdmissions.expr, /> 4$/, '0.8 of the 5 s timeout');
    for (const r of rules) {
      assert.match(r.expr, /namespace="wiw-system"/, `${r.alert} selects the release's namespace`);
      assert.equal(r.labels.team, 'platform');
      assert.match(r.labels.severity, /^(warning|critical)$/);
      assert.equal(r.annotations.runbook_url, `${RUNBOOK}#${r.alert.toLowerCase()}`);
    }
    const custom = find(
      (
        await renderChart({
          prometheusRule: { enabled: true, runbookUrl: RUNBOOK, selector: 'job="identity"' },
          tokenRequestor: { enabled: true, namespaces: ['apps'] },
        })
      ).manifests,
      'PrometheusRule',
    )!;
    const customRules = custom.spec.groups[0].rules as { alert: string; expr: string }[];
    assert.deepEqual(
      customRules.map((r) => r.alert),
      [...WEBHOOK_ALERTS, ...REQUESTOR_ALERTS],
    );
    for (const r of customRules) {
      assert.match(r.expr, /\{job="identity"[,}]/, r.alert);
      assert.doesNotMatch(r.expr, /namespace=/, r.alert);
    }
  });

  test("without runbookUrl the alerts link to docs/observability.md of the chart's source at this version", async () => {
    const chart = parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { sources?: string[]; appVersion: string };
    const render = renderChart({ prometheusRule: { enabled: true } });
    if (!chart.sources?.length) {
      await assert.rejects(render, /prometheusRule\.runbookUrl is required: Chart\.yaml names no source repository/);
      return;
    }
    const rule = find((await render).manifests, 'PrometheusRule')!;
    assert.equal(
      rule.spec.groups[0].rules[0].annotations.runbook_url,
      `${chart.sources[0].replace(/\/$/, '')}/blob/v${chart.appVersion}/docs/observability.md#workloadidentitywebhookerrors`,
    );
  });

  test("the dashboard is opt-in, in a ConfigMap with the Grafana sidecar's label, exactly the file", async () => {
    assert.equal(find((await renderChart({})).manifests, 'ConfigMap', `${FULLNAME}-dashboard`), undefined);
    const file = readFileSync(join(CHART, 'files/dashboards/workload-identity-webhook.json'), 'utf8');
    const cm = find(
      (await renderChart({ grafanaDashboard: { enabled: true } })).manifests,
      'ConfigMap',
      `${FULLNAME}-dashboard`,
    )!;
    assert.equal(cm.metadata.labels!.grafana_dashboard, '1');
    assert.equal(cm.metadata.namespace, 'wiw-system');
    assert.equal(cm.data['workload-identity-webhook.json'], file.trim());
    assert.equal(JSON.parse(cm.data['workload-identity-webhook.json']).uid, 'workload-identity-webhook');
    const elsewhere = find(
      (
        await renderChart({
          grafanaDashboard: {
            enabled: true,
            label: 'dashboards',
            labelValue: 'identity',
            annotations: { grafana_folder: 'Identity' },
            namespace: 'monitoring',
          },
        })
      ).manifests,
      'ConfigMap',
      `${FULLNAME}-dashboard`,
    )!;
    assert.equal(elsewhere.metadata.namespace, 'monitoring');
    assert.equal(elsewhere.metadata.labels!.dashboards, 'identity');
    assert.equal(
      elsewhere.metadata.labels!.grafana_dashboard,
      undefined,
      'the default label is replaced, not added to',
    );
    assert.deepEqual(elsewhere.metadata.annotations, { grafana_folder: 'Identity' });
  });
});
