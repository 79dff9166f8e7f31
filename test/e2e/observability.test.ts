// The chart's alerts and Grafana dashboard, judged by Prometheus's own code (wiw-promql, built
// from github.com/prometheus/prometheus): the rules load as Prometheus loads a rule file, every
// dashboard query parses, every metric they name is one a running `serve` or token requestor
// really exports, each alert has its runbook section, and alert expressions evaluated over real
// scrapes fire when they should and stay quiet otherwise.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { PromqlError, checkRules, evaluate, parseExprs, type Scrape } from '../harness/promql.ts';
import { httpsRequest } from '../support/https-client.ts';
import { REPO } from '../support/chart.ts';
import { startLocalWebhook, type LocalWebhook } from '../support/chart-webhook.ts';
import { dashboardQueries, exportedNames, renderedRuleGroups, type RenderedRule } from '../support/observability.ts';
import { startWebhook, until, type WebhookProcess } from '../support/webhook.ts';

const WITH_REQUESTOR = { tokenRequestor: { enabled: true, namespaces: ['apps'] } };
const RUNBOOK = readFileSync(join(REPO, 'docs/observability.md'), 'utf8');
/** The target labels the Prometheus operator gives the webhook's series. */
const TARGET = { namespace: 'wiw-system', job: 'wiw-workload-identity-webhook', pod: 'wiw-0' };

async function allRules(values: Record<string, any> = WITH_REQUESTOR): Promise<RenderedRule[]> {
  return (await renderedRuleGroups(values)).flatMap((g) => g.rules);
}

async function rule(name: string, values?: Record<string, any>): Promise<RenderedRule> {
  const found = (await allRules(values)).find((r) => r.alert === name);
  assert.ok(found, `alert ${name} is rendered`);
  return found;
}

/** GitHub's anchor of a Markdown heading. */
function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');
}

describe("alerts and dashboard, judged by Prometheus's own code", () => {
  test('the rules load as Prometheus loads a rule file; each alert has a severity, a summary, a description and its runbook section', async () => {
    const groups = await renderedRuleGroups(WITH_REQUESTOR);
    const loaded = await checkRules(groups);
    const alerts = loaded.flatMap((g) => g.rules);
    assert.equal(alerts.length, 9);
    const runbook = RUNBOOK.split(/^## Alerts$/m)[1];
    assert.ok(runbook, 'docs/observability.md has an Alerts section');
    const sections = [...runbook.matchAll(/^### (\S+)$/gm)].map((m) => m[1]);
    assert.deepEqual(
      sections,
      alerts.map((a) => a.alert),
      'one runbook section per alert, in the same order',
    );
    for (const a of alerts) {
      assert.match(a.labels?.severity ?? '', /^(warning|critical)$/, a.alert);
      assert.ok(a.annotations?.summary && a.annotations.description, a.alert);
      assert.equal(
        a.annotations?.runbook_url,
        `https://docs.example.com/observability.md#${anchor(a.alert!)}`,
        `${a.alert} links to its section`,
      );
      assert.ok(a.metrics.length > 0, `${a.alert} selects metrics`);
    }
  });

  test('a broken rule is refused, so the check above could fail', async () => {
    const groups = await renderedRuleGroups(WITH_REQUESTOR);
    const broken = structuredClone(groups);
    broken[0].rules[0].expr = 'sum(rate(wiw_denials_total[5m]) >';
    await assert.rejects(
      checkRules(broken),
      (err: unknown) => err instanceof PromqlError && /parse error/.test(err.stderr),
    );
    const misplaced = structuredClone(groups);
    (misplaced[0].rules[1] as unknown as Record<string, string>).severity = 'warning';
    await assert.rejects(checkRules(misplaced), /field severity not found/);
    const badTemplate = structuredClone(groups);
    badTemplate[0].rules[2].annotations.description = '{{ $value | nosuchfunction }}';
    await assert.rejects(checkRules(badTemplate), /nosuchfunction/);
  });

  test('every dashboard query parses as PromQL', async () => {
    const queries = dashboardQueries();
    assert.ok(queries.length >= 20, `${queries.length} queries`);
    const parsed = await parseExprs(queries.map((q) => q.expr));
    for (const [i, p] of parsed.entries()) assert.ok(p.metrics.length > 0, `${queries[i].where} selects a metric`);
    await assert.rejects(parseExprs(['rate(wiw_denials_total[5m]']), /unclosed left parenthesis/);
  });
});

describe('what the rules and the dashboard name is what the processes export', () => {
  let cp: ControlPlane;
  let webhook: WebhookProcess;
  let requestor: LocalWebhook;
  let requestorMetrics: () => Promise<string>;

  before(async () => {
    cp = await startControlPlane({ name: 'observability' });
    await createNamespace(cp, 'apps');
    await createServiceAccount(cp, 'apps', 'plain');
    // A malformed role-arn only warns outside --strict (as the peer admits it); a malformed role-arns list is refused.
    await createServiceAccount(cp, 'apps', 'broken', { 'eks.amazonaws.com/role-arns': 'not-a-profile' });
    // The Lease the chart would create.
    const lease = await cp.request('POST', '/apis/coordination.k8s.io/v1/namespaces/apps/leases', {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'requestor' },
      spec: {},
    });
    assert.equal(lease.status, 201, lease.body);
    webhook = await startWebhook(cp);
    requestor = await startLocalWebhook(cp, {
      command: 'token-requestor',
      kubeconfigPath: cp.kubeconfigPath,
      args: [
        '--lease-namespace',
        'apps',
        '--lease-name',
        'requestor',
        '--identity',
        'observability',
        '--namespaces',
        'apps',
      ],
    });
    const started = requestor.logs().find((l) => l.msg === 'token requestor started')!;
    requestorMetrics = async () => (await fetch(`http://127.0.0.1:${started.metricsPort}/metrics`)).text();
    await until('the token requestor to lead', async () =>
      /^wiw_token_requestor_leader 1$/m.test(await requestorMetrics()),
    );
  });

  after(async () => {
    await webhook?.stop();
    await requestor?.stop();
    await cp?.stop();
  });

  async function admit(serviceAccountName: string, count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      const res = await httpsRequest(`${webhook.url}/mutate`, {
        method: 'POST',
        ca: webhook.caPem,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          apiVersion: 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          request: {
            uid: `uid-${serviceAccountName}-${i}`,
            kind: { group: '', version: 'v1', kind: 'Pod' },
            resource: { group: '', version: 'v1', resource: 'pods' },
            namespace: 'apps',
            operation: 'CREATE',
            object: {
              apiVersion: 'v1',
              kind: 'Pod',
              metadata: { name: `p-${i}`, namespace: 'apps' },
              spec: { serviceAccountName, containers: [{ name: 'app', image: 'busybox' }] },
            },
          },
        }),
      });
      assert.equal(res.status, 200, res.body);
    }
  }

  async function scrape(): Promise<Scrape> {
    return { timeMs: Date.now(), labels: TARGET, body: await webhook.metrics() };
  }

  test('every metric an alert or a dashboard query names is exported by serve or the token requestor', async () => {
    const exported = new Set([...exportedNames(await webhook.metrics()), ...exportedNames(await requestorMetrics())]);
    const named: { where: string; metric: string }[] = [];
    for (const r of await checkRules(await renderedRuleGroups(WITH_REQUESTOR)))
      for (const a of r.rules) for (const metric of a.metrics) named.push({ where: `alert ${a.alert}`, metric });
    const queries = dashboardQueries();
    for (const [i, p] of (await parseExprs(queries.map((q) => q.expr))).entries())
      for (const metric of p.metrics) named.push({ where: queries[i].where, metric });
    assert.ok(named.length > 30);
    const missing = named.filter((n) => !exported.has(n.metric));
    assert.deepEqual(missing, [], 'named but exported by neither process');
    // The check sees a name that is not exported.
    assert.equal(exported.has('wiw_token_requestor_renewals_total'), false);
  });

  test("docs/observability.md's table lists exactly the project's own metrics, each with its process", async () => {
    const table = RUNBOOK.split(/^## Metrics$/m)[1].split(/^## /m)[0];
    const rows = [...table.matchAll(/^\| (serve|token-requestor) \| `(\w+)` \|/gm)].map((m) => `${m[1]} ${m[2]}`);
    const own = (text: string, process: string) =>
      [...exportedNames(text)]
        .filter((n) => n.startsWith('wiw_'))
        .map((n) => `${process} ${n.replace(/_(bucket|sum|count)$/, '')}`);
    const exported = new Set([
      ...own(await webhook.metrics(), 'serve'),
      ...own(await requestorMetrics(), 'token-requestor'),
    ]);
    assert.deepEqual(rows.toSorted(), [...exported].sort());
  });

  test('process metrics carry their standard names in both processes', async () => {
    for (const text of [await webhook.metrics(), await requestorMetrics()]) {
      const names = exportedNames(text);
      for (const standard of [
        'process_cpu_seconds_total',
        'process_resident_memory_bytes',
        'process_start_time_seconds',
        'nodejs_eventloop_lag_p99_seconds',
        'nodejs_heap_size_used_bytes',
      ])
        assert.ok(names.has(standard), standard);
      assert.deepEqual(
        [...names].filter((n) => /^wiw_(token_requestor_)?(process|nodejs)_/.test(n)),
        [],
        'no prefixed copies',
      );
    }
  });

  test('wiw_serving_certificate_expiry_timestamp_seconds is the notAfter of the certificate served', async () => {
    const validTo = await new Promise<string>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port: webhook.port, rejectUnauthorized: false }, () => {
        resolve(socket.getPeerCertificate().valid_to);
        socket.end();
      });
      socket.on('error', reject);
    });
    const exported = /^wiw_serving_certificate_expiry_timestamp_seconds (\S+)$/m.exec(await webhook.metrics())?.[1];
    assert.equal(Number(exported), Date.parse(validTo) / 1000);
  });

  test('alert expressions over real scrapes: denials fire the denial alert, not the error alert; the certificate alert follows its threshold', async () => {
    const denials = (await rule('WorkloadIdentityWebhookDenialsRising')).expr;
    const errors = (await rule('WorkloadIdentityWebhookErrors')).expr;
    const scrapes = [await scrape()];
    await admit('plain', 5);
    scrapes.push(await scrape());
    const quiet = scrapes.at(-1)!.timeMs;
    assert.deepEqual(await evaluate(scrapes, denials, quiet), [], 'admissions allowed: no denial alert');
    // Twice, so that the denial series, new at the first, has two samples.
    await admit('broken', 5);
    scrapes.push(await scrape());
    await admit('broken', 5);
    scrapes.push(await scrape());
    const now = scrapes.at(-1)!.timeMs;
    const fired = await evaluate(scrapes, denials, now);
    assert.equal(fired.length, 1, JSON.stringify(fired));
    assert.equal(fired[0].labels.namespace, 'wiw-system');
    assert.ok(fired[0].value > 0.1 && fired[0].value <= 1, `denied fraction ${fired[0].value}`);
    assert.deepEqual(await evaluate(scrapes, errors, now), [], 'InvalidRoleArn is the object, not the webhook');

    const certificate = async (days: number) =>
      evaluate(
        scrapes,
        (await rule('WorkloadIdentityWebhookCertificateExpiring', { prometheusRule: { certificateExpiryDays: days } }))
          .expr,
        now,
      );
    assert.deepEqual(await certificate(14), [], 'the self-signed certificate is valid for a year');
    const soon = await certificate(400);
    assert.equal(soon.length, 1);
    assert.equal(soon[0].labels.pod, 'wiw-0');
    assert.ok(soon[0].value > 364 * 86400 && soon[0].value <= 365 * 86400, `${soon[0].value} s left`);
  });

  test("the token requestor's alerts stay quiet while it leads and fails nothing", async () => {
    const t0 = Date.now();
    const first = { timeMs: t0, labels: { ...TARGET, pod: 'wiw-requestor-0' }, body: await requestorMetrics() };
    const t1 = Date.now();
    const second = { ...first, timeMs: t1, body: await requestorMetrics() };
    for (const name of ['WorkloadIdentityTokenRequestorNoLeader', 'WorkloadIdentityTokenRequestorFailing']) {
      assert.deepEqual(await evaluate([first, second], (await rule(name)).expr, t1), [], name);
    }
    // A standby alone is an alert: the same expression over a scrape that says leader 0.
    const standby = {
      ...second,
      body: second.body.replace(/^wiw_token_requestor_leader 1$/m, 'wiw_token_requestor_leader 0'),
    };
    assert.notEqual(standby.body, second.body);
    const noLeader = await evaluate([first, standby], (await rule('WorkloadIdentityTokenRequestorNoLeader')).expr, t1);
    assert.deepEqual(
      noLeader.map((s) => s.labels),
      [{ namespace: 'wiw-system' }],
    );
  });
});
