/**
 * The fault suite's real-node fault, short form (npm run bench:faults -- --mode real-nodes is the full one):
 * the Database operator deployed in the cluster by `opkit deploy` (its own image built by `opkit build`,
 * 2 replicas with leader election on a real node, restricted PSS, exactly the generated RBAC), a few
 * Databases whose pods go to the kwok nodes, then the leader's container SIGKILLed and the API server
 * restarted at the same moment. Every Database must converge, a new leader take the Lease, both replicas be
 * Ready again, a change after the fault be reconciled, with no Secret regenerated, no orphan, no restart of
 * the operator container beyond the one killed, no error-level line and no Event lost. Root only.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { FULL_SCALE } from '../../harness/faults/faults.ts';
import { buildOperatorImage } from '../../harness/faults/in-cluster.ts';
import { runFault } from '../../harness/faults/run.ts';

const work = mkdtempSync(join(tmpdir(), 'opkit-faults-real-test-'));
after(() => rmSync(work, { recursive: true, force: true }));

const N = 6;

describe('fault suite, real node', {
  skip: process.getuid?.() === 0 ? false : 'real nodes need root',
}, () => {
  // Its own bound (Node gives a test in a describe the runner's default otherwise): image build, cluster
  // with a real node, deploy, the fault; ~3 minutes at load 10.
  test('the leader pod SIGKILLed and the API server restarted together: a new leader, every Database converged', {
    timeout: 900_000,
  }, async () => {
    const imageArchive = await buildOperatorImage(work);
    const r = await runFault({
      fault: 'operator-pod-and-apiserver',
      n: N,
      mode: 'real-nodes',
      workDir: join(work, 'run'),
      imageArchive,
      scale: FULL_SCALE,
      // Generous safety bounds for a loaded 2-core machine, not timings (bench/results/faults.md has those).
      convergeTimeoutMs: 300_000,
      reactionTimeoutMs: 120_000,
      log: (line) => console.log(`# ${line}`),
    });
    const what = JSON.stringify(r);
    assert.equal(r.failed, undefined, what);
    assert.equal(r.converged, N, what);
    assert.equal(r.secretsRegenerated, 0, what);
    assert.equal(r.orphans, 0, what);
    assert.equal(r.crashes, 0, what);
    assert.ok(r.takeoverSeconds !== undefined, `no new leader: ${what}`);
    assert.ok(r.reactionSeconds !== undefined, `no reaction to a change after the fault: ${what}`);
    assert.ok(
      r.notes.some((n) => /both replicas Ready after/.test(n)),
      what,
    );
    assert.ok(
      r.notes.some((n) => /operator container restarts 1 \(1 the SIGKILL\)/.test(n)),
      what,
    );
    assert.equal(r.logLines.error ?? 0, 0, JSON.stringify({ logLines: r.logLines, notes: r.notes }));
    assert.equal(r.logLines.fatal ?? 0, 0, JSON.stringify({ logLines: r.logLines, notes: r.notes }));
    assert.ok((r.logLines.info ?? 0) > 0, `the pods' logs were read: ${JSON.stringify(r.logLines)}`);
    assert.equal(r.eventsLost, 0, what);
  });
});
