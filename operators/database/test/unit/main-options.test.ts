import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseOptions } from '../../src/main.ts';

describe('operator flags', () => {
  it('resyncs every 10 hours unless told otherwise, like controller-runtime', () => {
    assert.equal(parseOptions([], {}).syncPeriodMs, 36_000_000);
    assert.equal(parseOptions(['--sync-period', '30s'], {}).syncPeriodMs, 30_000);
    assert.equal(parseOptions([], { SYNC_PERIOD: '1h30m' }).syncPeriodMs, 5_400_000);
    assert.equal(parseOptions(['--sync-period', '0'], { SYNC_PERIOD: '1h' }).syncPeriodMs, 0);
  });

  it('refuses a malformed sync period, naming the flag', () => {
    assert.throws(() => parseOptions(['--sync-period', '10'], {}), /--sync-period: invalid duration "10"/);
  });
});
