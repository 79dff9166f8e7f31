// The logger as `serve` writes stdout (src/log.ts): what is buffered is written when the process
// exits, even decision lines still waiting for their batch.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

test('what is buffered is written when the process exits', () => {
  const script = `
    import { createLogger, DECISION_MESSAGE } from ${JSON.stringify(join(import.meta.dirname, '../../src/log.ts'))};
    const log = createLogger('info');
    for (let n = 0; n < 3; n++) log.info({ n }, DECISION_MESSAGE);
    process.exit(0);`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.deepEqual(
    out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).n),
    [0, 1, 2],
  );
});
