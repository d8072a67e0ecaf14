import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MetricsRegistry, WORKQUEUE_DURATION_BUCKETS, workQueueMetrics } from '../../src/metrics/index.ts';
import { ItemExponentialFailureRateLimiter, WorkQueue } from '../../src/queue/index.ts';
import { FakeClock } from '../../src/util/clock.ts';

async function lines(reg: MetricsRegistry): Promise<Set<string>> {
  return new Set((await reg.text()).split('\n'));
}

function has(set: Set<string>, line: string): void {
  assert.ok(set.has(line), `missing "${line}" in:\n${[...set].join('\n')}`);
}

describe('MetricsRegistry', () => {
  it('registers a controller with zeroed series and max_concurrent_reconciles', async () => {
    const m = new MetricsRegistry();
    m.registerController('db', 4);
    const l = await lines(m);
    for (const result of ['success', 'error', 'requeue', 'requeue_after']) {
      has(l, `controller_runtime_reconcile_total{controller="db",result="${result}"} 0`);
    }
    has(l, 'controller_runtime_reconcile_errors_total{controller="db"} 0');
    has(l, 'controller_runtime_terminal_reconcile_errors_total{controller="db"} 0');
    has(l, 'controller_runtime_reconcile_panics_total{controller="db"} 0');
    has(l, 'controller_runtime_max_concurrent_reconciles{controller="db"} 4');
    has(l, 'controller_runtime_active_workers{controller="db"} 0');
    has(l, '# TYPE controller_runtime_reconcile_time_seconds histogram');
    assert.throws(() => m.registerController('db', 1), /already exists/);
    m.unregisterController('db');
    m.registerController('db', 1);
  });

  it('observeReconcile counts results and observes the histogram', async () => {
    const m = new MetricsRegistry();
    m.registerController('c', 1);
    m.observeReconcile('c', 'success', 0.003);
    m.observeReconcile('c', 'success', 0.2);
    m.observeReconcile('c', 'requeue_after', 1);
    const l = await lines(m);
    has(l, 'controller_runtime_reconcile_total{controller="c",result="success"} 2');
    has(l, 'controller_runtime_reconcile_total{controller="c",result="requeue_after"} 1');
    has(l, 'controller_runtime_reconcile_time_seconds_bucket{le="0.005",controller="c"} 1');
    has(l, 'controller_runtime_reconcile_time_seconds_count{controller="c"} 3');
  });

  it('separate registries do not share series (several managers per process)', async () => {
    const a = new MetricsRegistry();
    const b = new MetricsRegistry();
    a.registerController('same', 1);
    b.registerController('same', 2);
    a.observeReconcile('same', 'error', 0);
    has(await lines(a), 'controller_runtime_reconcile_total{controller="same",result="error"} 1');
    has(await lines(b), 'controller_runtime_reconcile_total{controller="same",result="error"} 0');
    has(await lines(b), 'controller_runtime_max_concurrent_reconciles{controller="same"} 2');
  });

  it('workQueueMetrics binds a WorkQueue to the workqueue_* series', async () => {
    const m = new MetricsRegistry();
    const clock = new FakeClock(0);
    const hooks = workQueueMetrics(m, 'q');
    const q = new WorkQueue<string>({
      name: 'q',
      clock,
      metrics: hooks,
      rateLimiter: new ItemExponentialFailureRateLimiter(10, 1000),
    });
    const detach = hooks.attach(q);
    let l = await lines(m);
    has(l, 'workqueue_depth{name="q",controller="q"} 0');
    has(l, 'workqueue_adds_total{name="q",controller="q"} 0');
    has(l, 'workqueue_retries_total{name="q",controller="q"} 0');

    q.add('a');
    q.add('b');
    q.add('a'); // de-duplicated: no add counted
    l = await lines(m);
    has(l, 'workqueue_adds_total{name="q",controller="q"} 2');
    has(l, 'workqueue_depth{name="q",controller="q"} 2');

    clock.advance(2_000);
    assert.equal(await q.get(), 'a');
    assert.equal(await q.get(), 'b');
    clock.advance(3_000);
    q.done('a');
    q.addRateLimited('b');
    l = await lines(m);
    has(l, 'workqueue_depth{name="q",controller="q"} 0');
    has(l, 'workqueue_queue_duration_seconds_count{name="q",controller="q"} 2');
    has(l, 'workqueue_queue_duration_seconds_sum{name="q",controller="q"} 4');
    has(l, 'workqueue_work_duration_seconds_count{name="q",controller="q"} 1');
    has(l, 'workqueue_work_duration_seconds_sum{name="q",controller="q"} 3');
    has(l, 'workqueue_retries_total{name="q",controller="q"} 1');
    has(l, 'workqueue_unfinished_work_seconds{name="q",controller="q"} 3');
    has(l, 'workqueue_longest_running_processor_seconds{name="q",controller="q"} 3');
    has(l, 'workqueue_work_duration_seconds_bucket{le="1e-8",name="q",controller="q"} 0');

    clock.advance(1_000);
    l = await lines(m);
    has(l, 'workqueue_unfinished_work_seconds{name="q",controller="q"} 4');

    detach();
    l = await lines(m);
    assert.ok(![...l].some((x) => x.startsWith('workqueue_unfinished_work_seconds{')), 'gone after detach');
    q.shutDown();
  });

  it('duration buckets are client-go exponential buckets (10ns .. 1000s)', () => {
    assert.equal(WORKQUEUE_DURATION_BUCKETS.length, 12);
    assert.equal(WORKQUEUE_DURATION_BUCKETS[0], 1e-8);
    assert.equal(WORKQUEUE_DURATION_BUCKETS[11], 1000);
  });

  it('rest client requests and leader election status', async () => {
    const m = new MetricsRegistry();
    const observe = m.restClientObserver();
    observe({ method: 'GET', code: '200', host: '127.0.0.1:6443' });
    observe({ method: 'GET', code: '200', host: '127.0.0.1:6443' });
    observe({ method: 'PUT', code: '<error>', host: '127.0.0.1:6443' });
    m.setLeader('opkit-lock', true);
    let l = await lines(m);
    has(l, 'rest_client_requests_total{code="200",method="GET",host="127.0.0.1:6443"} 2');
    has(l, 'rest_client_requests_total{code="<error>",method="PUT",host="127.0.0.1:6443"} 1');
    has(l, 'leader_election_master_status{name="opkit-lock"} 1');
    m.setLeader('opkit-lock', false);
    l = await lines(m);
    has(l, 'leader_election_master_status{name="opkit-lock"} 0');
    assert.match(m.contentType, /^text\/plain/);
  });

  it('optional default process metrics and default labels', async () => {
    const m = new MetricsRegistry({ defaultMetrics: true, defaultLabels: { pod: 'p1' } });
    m.registerController('c', 1);
    const text = await m.text();
    assert.match(text, /process_cpu_user_seconds_total\{pod="p1"\}/);
    assert.match(text, /controller_runtime_max_concurrent_reconciles\{controller="c",pod="p1"\} 1/);
    assert.doesNotMatch(await new MetricsRegistry().text(), /process_cpu_user_seconds_total/);
  });
});
