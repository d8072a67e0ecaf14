/**
 * The fault suite's short form (npm run bench:faults is the full one): a few faults at small N against the
 * Database operator as its own process, exactly config/rbac, through the fault proxy. Each fault must
 * converge every Database without regenerating a Secret, without orphans or crashes, and within the
 * bounds of issue 15: a change reconciled within 5 s after a period of cut connections, within 60 s
 * after connections went half-open (a watch silent past its timeout + 10 s, at most 45 s, is presumed
 * dead; its pool then closes every connection in use that delivers nothing within 2 s), and an API
 * server restart without error-level lines or lost Events.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { FaultName, FaultScale } from '../../harness/faults/faults.ts';
import { type FaultResult, runFault } from '../../harness/faults/run.ts';

const work = mkdtempSync(join(tmpdir(), 'opkit-faults-test-'));
// OPKIT_FAULTS_KEEP=1 keeps the work directory (the operators' logs) for a diagnosis.
after(() => {
  if (process.env.OPKIT_FAULTS_KEEP) process.stdout.write(`# work directory kept: ${work}\n`);
  else rmSync(work, { recursive: true, force: true });
});

const SCALE: FaultScale = { restarts: 1, kills: 1, cutSeconds: 15, cutEverySeconds: 3, stallSeconds: 10 };
const N = 6;

async function run(fault: FaultName): Promise<FaultResult> {
  const r = await runFault({
    fault,
    n: N,
    mode: 'apiserver',
    workDir: join(work, fault),
    scale: SCALE,
    convergeTimeoutMs: 150_000,
    reactionTimeoutMs: 240_000,
    log: () => {},
  });
  const what = JSON.stringify(r);
  assert.equal(r.failed, undefined, what);
  assert.equal(r.converged, N, what);
  assert.equal(r.secretsRegenerated, 0, what);
  assert.equal(r.orphans, 0, what);
  assert.equal(r.crashes, 0, what);
  assert.ok(r.reactionSeconds !== undefined, `no reaction to a change after ${fault}: ${what}`);
  return r;
}

describe('fault suite, short form', { timeout: 600_000 }, () => {
  test('an API server restart: no error-level line, no lost Event', async () => {
    const r = await run('apiserver-restart');
    assert.equal(r.logLines.error ?? 0, 0, JSON.stringify({ logLines: r.logLines, notes: r.notes }));
    assert.equal(r.eventsLost, 0);
  });

  test('connections cut every 3 s for 15 s: a change after it is reconciled within 5 s', async () => {
    const r = await run('proxy-cut');
    assert.ok((r.reactionSeconds ?? Infinity) <= 5, `reaction ${r.reactionSeconds} s`);
  });

  test('half-open connections: the watches are re-established, a change reconciled within 60 s', async () => {
    const r = await run('proxy-half-open');
    // Issue 15's bound. Detection at most 45 s after the last byte (watch timeout 25-35 s + 10 s), usually
    // sooner (the first of the operator's watches to reach its deadline); requests in flight on dead
    // connections end 2 s later instead of at their 60 s timeout (before: 66-72 s, and no reaction within
    // 120 s in one CI run with requests in flight). No error-level line: nothing times out.
    assert.ok((r.reactionSeconds ?? Infinity) <= 60, `reaction ${r.reactionSeconds} s`);
    assert.equal(r.logLines.error ?? 0, 0, JSON.stringify({ logLines: r.logLines, notes: r.notes }));
  });
});
