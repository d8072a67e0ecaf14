/**
 * Log lines to stdout in batches (log/batched-stdout.ts): one write per window, none while idle, and
 * nothing lost when the process exits.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, test } from 'node:test';
import { BATCH_BYTES, BatchedDestination, type BatchSink } from '../../src/log/batched-stdout.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function recordingSink(): BatchSink & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    write: (text) => calls.push(`write ${text}`),
    flushSync: () => calls.push('flushSync'),
    writeSync: (text) => calls.push(`writeSync ${text}`),
    flush: (cb) => {
      calls.push('flush');
      cb();
    },
  };
}

describe('BatchedDestination', () => {
  test('the lines of one window go out in one write, after the window; nothing is written while idle', async () => {
    const sink = recordingSink();
    const dest = new BatchedDestination(sink, 30);
    dest.write('a\n');
    dest.write('b\n');
    await sleep(5);
    dest.write('c\n');
    assert.deepEqual(sink.calls, []);
    await sleep(60);
    assert.deepEqual(sink.calls, ['write a\nb\nc\n']);
    await sleep(100);
    assert.deepEqual(sink.calls, ['write a\nb\nc\n'], 'no timer while nothing is logged');
    dest.write('d\n');
    await sleep(60);
    assert.deepEqual(sink.calls, ['write a\nb\nc\n', 'write d\n']);
  });

  test(`${BATCH_BYTES} bytes are written at once`, () => {
    const sink = recordingSink();
    const dest = new BatchedDestination(sink, 10_000);
    const line = `${'x'.repeat(1023)}\n`;
    for (let i = 0; i < BATCH_BYTES / 1024 - 1; i++) dest.write(line);
    assert.equal(sink.calls.length, 0);
    dest.write(line);
    assert.equal(sink.calls.length, 1);
    assert.equal(sink.calls[0]?.length, 'write '.length + BATCH_BYTES);
    dest.flushSync();
    assert.deepEqual(sink.calls.slice(1), ['flushSync'], 'nothing held after a full batch');
  });

  test("flush hands the held lines over at once, and calls back once the stream wrote them (pino's logger.flush)", () => {
    const sink = recordingSink();
    const dest = new BatchedDestination(sink, 10_000);
    dest.write('a\n');
    let called = false;
    dest.flush(() => {
      called = true;
    });
    assert.deepEqual(sink.calls, ['write a\n', 'flush']);
    assert.equal(called, true);
  });

  test('flushSync writes what the stream holds, then the held lines, synchronously', () => {
    const sink = recordingSink();
    const dest = new BatchedDestination(sink, 10_000);
    dest.write('a\n');
    dest.write('b\n');
    dest.flushSync();
    assert.deepEqual(sink.calls, ['flushSync', 'writeSync a\nb\n']);
  });
});

describe('createLogger on stdout', () => {
  const logger = resolve(import.meta.dirname, '../../src/log/logger.ts');
  const run = (ending: string): string[] =>
    execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { createLogger } = await import(${JSON.stringify(logger)});
         const log = createLogger({ name: 't' });
         for (let i = 0; i < 3; i++) log.info({ i }, 'line');
         ${ending}`,
      ],
      { encoding: 'utf8' },
    )
      .trim()
      .split('\n')
      .map((l) => String((JSON.parse(l) as { i: number }).i));

  test('every line reaches stdout when the process exits at once, or when its event loop ends', () => {
    assert.deepEqual(run('process.exit(0);'), ['0', '1', '2']);
    assert.deepEqual(run(''), ['0', '1', '2']);
    assert.deepEqual(run("setTimeout(() => { log.info({ i: 3 }, 'later'); process.exit(0); }, 150);"), [
      '0',
      '1',
      '2',
      '3',
    ]);
  });
});
