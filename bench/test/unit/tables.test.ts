import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ImplName } from '../../harness/report.ts';
import type { RunResult } from '../../harness/scenarios.ts';
import { resultTables, tablesMarkdown } from '../../harness/tables.ts';

const run = (impl: ImplName, seconds: number, workers?: number): RunResult => ({
  impl,
  n: 1000,
  kubeVersion: 'v1.34.4',
  ...(workers ? { workers } : {}),
  convergence: {
    seconds,
    createSeconds: 1,
    requests: { byVerb: {}, writes: 10, reads: 1, detail: {} },
    ...(impl === 'floor' || impl === 'client-node' ? {} : { cpuSeconds: seconds / 2, peakRssMiB: 100 }),
  },
});

const cell = (md: string, figure: string) => md.split('\n').find((l) => l.includes(`| ${figure} |`));

test('the headline table compares equal worker counts; defaults vs defaults comes second', () => {
  const tables = resultTables([
    run('opkit', 30, 2),
    run('controller-runtime', 40, 2),
    run('floor', 20),
    run('opkit', 31, 2),
    run('controller-runtime', 41, 2),
    run('opkit', 50),
    run('controller-runtime', 60),
  ]);
  assert.deepEqual(
    tables.map((t) => t.title),
    ['Like for like: 2 workers for every operator', 'Defaults vs defaults'],
  );
  const [like, defaults] = tables;
  const time = (t: typeof like) => t!.metrics.find((m) => m.metric === 'convergence time')!.values;
  // Each table holds only its own runs: no default run leaks into the like-for-like medians.
  assert.deepEqual(time(like), { opkit: [30, 31], 'controller-runtime': [40, 41], floor: [20] });
  assert.deepEqual(time(defaults), { opkit: [50], 'controller-runtime': [60] });
  assert.match(like!.settings, /--workers 2/);
  assert.match(defaults!.settings, /opkit 2, controller-runtime 1/);

  const md = tablesMarkdown(tables, 'plot.svg');
  const headline = md.indexOf('### Headline: Like for like: 2 workers');
  const second = md.indexOf('### Defaults vs defaults');
  assert.ok(headline >= 0 && second > headline, md);
  // Every table says which settings it used, right under its heading.
  assert.equal(md.match(/^Settings: /gm)?.length, 2);
  // One plot, of the headline figures.
  assert.equal(md.match(/!\[.*\]\(plot\.svg\)/g)?.length, 1);
  assert.ok(md.indexOf('](plot.svg)') < second);
  // The ratio in the headline is of like-for-like medians: 30.5 / 40.5.
  assert.match(cell(md.slice(0, second), 'convergence time (s)') ?? '', /\| 0\.75 \|/);
  assert.match(cell(md.slice(second), 'convergence time (s)') ?? '', /\| 0\.83 \|/);
});

test('runs without a recorded worker count (older results.json) are defaults vs defaults', () => {
  const tables = resultTables([run('opkit', 50), run('controller-runtime', 60), run('client-node', 90)]);
  assert.deepEqual(
    tables.map((t) => t.title),
    ['Defaults vs defaults'],
  );
  assert.deepEqual(tables[0]!.metrics.find((m) => m.metric === 'convergence time')!.values, {
    opkit: [50],
    'controller-runtime': [60],
    'client-node': [90],
  });
  assert.match(tablesMarkdown(tables), /^### Headline: Defaults vs defaults/m);
});

test('several worker counts give one like-for-like table each, the smallest first', () => {
  const tables = resultTables([
    run('opkit', 10, 4),
    run('controller-runtime', 12, 4),
    run('opkit', 20, 1),
    run('controller-runtime', 22, 1),
  ]);
  assert.deepEqual(
    tables.map((t) => t.title),
    ['Like for like: 1 worker for every operator', 'Like for like: 4 workers for every operator'],
  );
});

test('memory: what one more cached object costs, from the idle RSS and heap after start-up', () => {
  const started = (impl: ImplName, n: number, objects: number, rss: number, heap: number): RunResult => ({
    impl,
    n,
    kubeVersion: 'v1.34.4',
    workers: 2,
    startup: {
      readySeconds: 1,
      requests: { byVerb: {}, writes: 0, reads: 0, detail: {} },
      settleSeconds: 0,
      cachedObjects: objects,
      rssMiB: rss,
      heapMiB: heap,
    },
  });
  const [table] = resultTables([
    started('opkit', 100, 600, 100, 40),
    started('opkit', 1000, 6000, 154, 67),
    started('controller-runtime', 100, 600, 50, 20),
    started('controller-runtime', 1000, 6000, 77, 47),
  ]);
  const row = (metric: string) => table!.metrics.find((m) => m.metric === metric)?.values;
  // (154 - 100) MiB over 5400 more objects = 10.24 KiB each; heap (67 - 40) MiB / 5400 = 5.12 KiB.
  assert.deepEqual(row('RSS per cached object, N=100 -> 1000'), {
    opkit: [10.24],
    'controller-runtime': [5.12],
  });
  assert.deepEqual(row('heap per cached object, N=100 -> 1000'), {
    opkit: [5.12],
    'controller-runtime': [5.12],
  });
  assert.match(
    tablesMarkdown([table!]),
    /\| memory \| 1000 \| RSS per cached object, N=100 -> 1000 \(KiB\) \| 10\.2 \| 5\.1 \|/,
  );
});
