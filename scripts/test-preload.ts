/**
 * Loaded (`--import`) into every test file's process by scripts/test.ts: stdout and stderr become blocking.
 *
 * Each file's process reports its results to the runner over its stdout, a pipe. With `--test-force-exit`
 * and more than one file at a time, the process may exit while some of those writes are still queued (a
 * pipe's writes are asynchronous on Linux): the runner never sees those results, counts fewer tests, and
 * still exits 0, so a failure among them would go unnoticed (nodejs/node#64833, open). Measured here: 40
 * files of 50 tests reported 1821-1881 of 2000. Blocking writes are done before exit can happen.
 */
type WithHandle = NodeJS.WriteStream & { _handle?: { setBlocking?: (blocking: boolean) => void } };

for (const stream of [process.stdout, process.stderr] as WithHandle[]) stream._handle?.setBlocking?.(true);
