/** The fault suite's pure parts: counting an operator's log lines, the faults of each mode. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FAULTS, faultsOf, REAL_NODE_FAULTS } from '../../harness/faults/faults.ts';
import { countLogLines } from '../../harness/faults/run.ts';

test("log lines by level: the harness's string levels and a container's numeric (pino) ones alike", () => {
  const text = [
    '{"level":"info","msg":"starting"}',
    '{"level":"warn","msg":"Reconciler error: the API server is unavailable"}',
    '{"level":30,"time":1,"msg":"Created StatefulSet db-1"}',
    '{"level":40,"msg":"failed to record event Created"}',
    '{"level":50,"msg":"reconcile timed out"}',
    '{"level":35,"msg":"a custom level"}',
    '{not json',
    'I1204 a klog line, not the operator',
    '',
  ].join('\n');
  assert.deepEqual(countLogLines(text), {
    byLevel: { info: 2, warn: 2, error: 1, '35': 1, unparsed: 1 },
    eventsLost: 1,
    errors: ['{"level":50,"msg":"reconcile timed out"}'],
  });
});

test('real-nodes mode runs its own faults; the operator-process faults are not among them', () => {
  assert.deepEqual([...faultsOf('real-nodes')], ['baseline', 'operator-pod-and-apiserver']);
  assert.deepEqual(faultsOf('cluster'), FAULTS);
  assert.ok(!(FAULTS as readonly string[]).includes('operator-pod-and-apiserver'));
  assert.equal(REAL_NODE_FAULTS.length, 2);
});
