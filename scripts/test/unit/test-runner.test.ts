/**
 * scripts/test.ts: a hung test fails after the default per-test timeout instead of hanging the run, and every
 * test's result reaches the report.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

function runTests(files: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  // Without NODE_TEST_CONTEXT the inner `node --test` prints its own report instead of reporting to this runner.
  const { NODE_TEST_CONTEXT: _, ...clean } = { ...process.env, ...env };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['scripts/test.ts', ...files], {
      cwd: ROOT,
      env: clean,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => {
      output += d;
    });
    child.stderr.on('data', (d) => {
      output += d;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

test('a hung test fails after OPKIT_TEST_TIMEOUT and the run ends with a failure', {
  timeout: 120_000,
}, async () => {
  const r = await runTests(['scripts/test/fixtures/hangs.ts'], { OPKIT_TEST_TIMEOUT: '1000' });
  assert.equal(r.code, 1, r.output);
  assert.match(r.output, /test timed out after 1000ms/, r.output);
  assert.match(r.output, /ℹ pass 1/, r.output);
});

test('a malformed OPKIT_TEST_TIMEOUT is refused, saying what is expected', { timeout: 60_000 }, async () => {
  const r = await runTests(['scripts/test/fixtures/hangs.ts'], { OPKIT_TEST_TIMEOUT: '10m' });
  assert.equal(r.code, 2, r.output);
  assert.match(r.output, /OPKIT_TEST_TIMEOUT must be a number of milliseconds/);
});

test('every result reaches the report: 40 files of 50 tests, two at a time, force-exited, count 2000', {
  timeout: 300_000,
}, async () => {
  // Without test-preload.ts, Node dropped results of files whose process exited with writes still queued.
  const dir = mkdtempSync(join(tmpdir(), 'opkit-test-runner-'));
  try {
    const files = Array.from({ length: 40 }, (_, f) => {
      const file = join(dir, `f${f}.test.mjs`);
      const tests = Array.from(
        { length: 50 },
        (_, t) => `test('file ${f}, test ${t}: a name as long as the real ones tend to be', () => {});`,
      );
      writeFileSync(file, ["import { test } from 'node:test';", ...tests].join('\n'));
      return file;
    });
    const r = await runTests(files, { OPKIT_TEST_CONCURRENCY: '2' });
    assert.equal(r.code, 0, r.output.slice(-2000));
    assert.match(r.output, /ℹ tests 2000\n/);
    assert.match(r.output, /ℹ pass 2000\n/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
