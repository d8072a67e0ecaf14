/**
 * Runs the test suites with Node's built-in test runner.
 *   node scripts/test.ts               all tests (unit, then integration)
 *   node scripts/test.ts --unit        only test/unit
 *   node scripts/test.ts --integration test/integration (real control planes) and test/replication (real engines)
 *   node scripts/test.ts <file...>     just those files
 * Integration tests start their own control planes; two at a time is what 2 cores take comfortably.
 *
 * Environment: OPKIT_TEST_CONCURRENCY (files in parallel, default 2); OPKIT_TEST_TIMEOUT (milliseconds, default
 * 600000 = 10 minutes): the limit of every test and hook that sets no `timeout` of its own, so a hung test fails
 * instead of hanging CI. Node gives a test inside `describe(..., { timeout })` this default, not the suite's, so
 * it must exceed the slowest single test or hook (a cluster start-up, the CLI workflow's npm install).
 * `--test-force-exit` ends a file's process once its tests are done even if a timed-out test left a timer or
 * socket behind (otherwise that process, and with it the run, would never end); test-preload.ts makes sure
 * that exit does not drop the results the process has yet to write.
 */
import { spawnSync } from 'node:child_process';
import { globSync } from 'node:fs';

const args = process.argv.slice(2);
const files = args.filter((a) => !a.startsWith('--'));
const roots = ['packages/*', 'operators/*', 'bench', 'scripts'];
const pick = (kind: string) => roots.flatMap((r) => globSync(`${r}/test/${kind}/**/*.test.ts`)).sort();

let selected: string[];
if (files.length > 0) selected = files;
else if (args.includes('--unit')) selected = pick('unit');
else if (args.includes('--integration')) selected = [...pick('integration'), ...pick('replication')];
else selected = [...pick('unit'), ...pick('integration'), ...pick('replication')];

if (selected.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
// Integration tests need the control plane binaries: build them first (a no-op once cached), with progress.
if (selected.some((f) => f.includes('/integration/'))) {
  // Real-node tests also need kubelet, kube-proxy, CoreDNS and the local images: built here, with progress.
  // (Only as root: elsewhere those tests skip themselves.)
  const wantsReal = selected.some((f) => f.includes('/real-nodes')) && process.getuid?.() === 0;
  const realNodes = wantsReal ? ['--real-nodes', '1'] : [];
  const setup = spawnSync(
    process.execPath,
    ['packages/controlplane/src/cli/main.ts', 'install', ...realNodes],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  if (setup.status !== 0) process.exit(setup.status ?? 1);
}
const concurrency = process.env.OPKIT_TEST_CONCURRENCY ?? '2';
const timeout = process.env.OPKIT_TEST_TIMEOUT ?? '600000';
if (!/^[1-9][0-9]*$/.test(timeout)) {
  console.error(
    `OPKIT_TEST_TIMEOUT must be a number of milliseconds, e.g. 600000; got ${JSON.stringify(timeout)}`,
  );
  process.exit(2);
}
const result = spawnSync(
  process.execPath,
  [
    `--import=${new URL('./test-preload.ts', import.meta.url).href}`,
    '--test',
    `--test-concurrency=${concurrency}`,
    `--test-timeout=${timeout}`,
    '--test-force-exit',
    '--test-reporter=spec',
    ...selected,
  ],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
