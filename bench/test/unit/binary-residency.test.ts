/** Which of a process's executable pages are resident, by symbol: checked on this test's own process. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readBinaryResidency } from '../../harness/binary-residency.ts';
import { readRssByMapping } from '../../harness/proc.ts';

test("readBinaryResidency: this process's node binary, the same total as smaps, grouped by symbol", () => {
  const r = readBinaryResidency(process.pid);
  assert.equal(r.binary, process.execPath);
  const node = readRssByMapping(process.pid).find(([name]) => name === 'node')?.[1];
  assert.ok(node !== undefined && node > 0);
  // Both read the same pages a moment apart: a few may have been faulted in between.
  assert.ok(Math.abs(r.residentBytes - node) <= 64 * 4096, `${r.residentBytes} against smaps' ${node}`);
  const sum = (xs: [string, number][]) => xs.reduce((a, [, b]) => a + b, 0);
  assert.equal(sum(r.groups), r.residentBytes);
  assert.equal(sum(r.topSymbols), r.residentBytes);
  const groups = new Map(r.groups);
  // Any Node process runs V8 and Node's own C++.
  assert.ok((groups.get('V8 other') ?? 0) > 2 ** 20, 'V8 code is resident');
  assert.ok((groups.get('Node') ?? 0) > 0, "Node's code is resident");
});
