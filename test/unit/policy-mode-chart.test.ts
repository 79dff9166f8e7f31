// The chart's copy of the policy mode's objects is the code's (src/policy-mode/policy.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { policyModeChartFile } from '../../src/policy-mode/policy.ts';

test('charts/workload-identity-webhook/files/policy-mode.json is what src/policy-mode/policy.ts generates', () => {
  const file = join(import.meta.dirname, '../../charts/workload-identity-webhook/files/policy-mode.json');
  assert.equal(readFileSync(file, 'utf8'), policyModeChartFile(), 'regenerate it: node scripts/policy-mode-chart.ts');
});
