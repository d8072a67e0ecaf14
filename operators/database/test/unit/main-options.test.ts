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

  it('polls replication at the controller default (30 s) unless told otherwise; 0 never', () => {
    assert.equal(parseOptions([], {}).replicationPollMs, undefined);
    assert.equal(parseOptions(['--replication-poll-interval', '10s'], {}).replicationPollMs, 10_000);
    assert.equal(parseOptions([], { REPLICATION_POLL_INTERVAL: '1m' }).replicationPollMs, 60_000);
    assert.equal(parseOptions(['--replication-poll-interval', '0'], {}).replicationPollMs, 0);
    assert.throws(
      () => parseOptions(['--replication-poll-interval', 'often'], {}),
      /--replication-poll-interval: invalid duration "often"/,
    );
  });

  it('has no client-side rate limit unless --kube-api-qps is set', () => {
    assert.equal(parseOptions([], {}).kubeApi, undefined);
    assert.equal(parseOptions(['--kube-api-qps', '0'], {}).kubeApi, undefined);
    assert.deepEqual(parseOptions(['--kube-api-qps', '20'], {}).kubeApi, { qps: 20 });
    assert.deepEqual(parseOptions(['--kube-api-qps', '2.5', '--kube-api-burst', '10'], {}).kubeApi, {
      qps: 2.5,
      burst: 10,
    });
    assert.deepEqual(parseOptions([], { KUBE_API_QPS: '50', KUBE_API_BURST: '100' }).kubeApi, {
      qps: 50,
      burst: 100,
    });
  });

  it('refuses a malformed qps or burst, naming the flag', () => {
    assert.throws(() => parseOptions(['--kube-api-qps', 'fast'], {}), /--kube-api-qps must be a number >= 0/);
    assert.throws(() => parseOptions(['--kube-api-qps', '-1'], {}), /--kube-api-qps/);
    assert.throws(
      () => parseOptions(['--kube-api-qps', '5', '--kube-api-burst', '0'], {}),
      /--kube-api-burst/,
    );
    assert.throws(() => parseOptions(['--kube-api-burst', '5'], {}), /--kube-api-burst needs --kube-api-qps/);
  });
});
