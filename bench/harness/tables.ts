/**
 * The figures of a set of runs, grouped into the report's tables: the headline compares opkit and
 * controller-runtime with the same number of workers (`--workers W`, like for like); a second table, when
 * the runs include them (`--with-defaults`), compares each operator with its own default worker count.
 * Pure: results in, tables out.
 */
import { type ImplName, type Metric, markdownTable, median } from './report.ts';
import type { RequestSummary, RunResult } from './scenarios.ts';

/** The implementations that take a worker count (`--max-concurrent-reconciles`), and their defaults. */
export const DEFAULT_WORKERS: Partial<Record<ImplName, number>> = { opkit: 2, 'controller-runtime': 1 };

export interface Table {
  title: string;
  /** One line saying which settings the figures used. */
  settings: string;
  metrics: Metric[];
}

function eventWrites(req: RequestSummary): number {
  return Object.entries(req.detail)
    .filter(([verb]) => ['POST', 'PUT', 'PATCH', 'DELETE'].includes(verb))
    .reduce((sum, [, byRes]) => sum + (byRes.events ?? 0), 0);
}

export function metricsOf(rs: RunResult[]): Metric[] {
  const out: Metric[] = [];
  const add = (
    scenarioName: string,
    n: number,
    metric: string,
    unit: string,
    pick: (r: RunResult) => number | undefined,
  ) => {
    const values: Metric['values'] = {};
    for (const r of rs.filter((x) => x.n === n)) {
      const v = pick(r);
      if (v !== undefined && Number.isFinite(v)) values[r.impl] = [...(values[r.impl] ?? []), v];
    }
    if (Object.keys(values).length)
      out.push({ scenario: scenarioName, n: Math.abs(n), metric, unit, values });
  };
  for (const n of [...new Set(rs.map((r) => r.n))].sort((a, b) => a - b)) {
    const c = (r: RunResult) => {
      const fig = r.convergence ?? r.e2e;
      if (!fig || r.impl !== 'floor') return fig;
      // The floor's requests are the harness's own: leave out the workload's Database creates, which the
      // operators' figures do not include either.
      const creates = fig.requests.detail.POST?.databases ?? 0;
      return { ...fig, requests: { ...fig.requests, writes: fig.requests.writes - creates } };
    };
    const sc = rs.some((r) => r.n === n && r.e2e) ? 'e2e (cluster)' : 'convergence';
    add(
      sc,
      n,
      sc === 'convergence' ? 'convergence time' : 'time until every Database is Running',
      's',
      (r) => c(r)?.seconds,
    );
    add(
      sc,
      n,
      sc === 'convergence' ? 'the median Database converged after' : 'the median Database Running after',
      's',
      (r) => c(r)?.medianSeconds,
    );
    add(sc, n, 'writes', '', (r) => c(r)?.requests.writes);
    add(sc, n, 'writes per Database', '', (r) => (c(r) ? c(r)!.requests.writes / Math.abs(n) : undefined));
    add(sc, n, 'writes per Database, Events excluded', '', (r) =>
      c(r) ? (c(r)!.requests.writes - eventWrites(c(r)!.requests)) / Math.abs(n) : undefined,
    );
    add(sc, n, 'reads (GET+LIST)', '', (r) => c(r)?.requests.reads);
    add(sc, n, 'reconciles', '', (r) => c(r)?.reconciles);
    add(sc, n, 'operator CPU', 's', (r) => c(r)?.cpuSeconds);
    add(sc, n, 'peak RSS', 'MiB', (r) => c(r)?.peakRssMiB);
    add('steady', n, 'writes while idle', '', (r) => r.steady?.requests.writes);
    add('steady', n, 'reads while idle', '', (r) => r.steady?.requests.reads);
    add('steady', n, 'idle CPU', 's', (r) => r.steady?.cpuSeconds);
    add('steady', n, 'reconciles while idle (resyncs)', '', (r) => r.steady?.reconciles);
    add('latency', n, 'spec change -> StatefulSet p50', 'ms', (r) => r.latency?.p50ms);
    add('latency', n, 'spec change -> StatefulSet p99', 'ms', (r) => r.latency?.p99ms);
    add('latency', n, 'writes per change', '', (r) =>
      r.latency ? r.latency.requests.writes / r.latency.changes : undefined,
    );
    add('startup', n, 'time to ready', 's', (r) => r.startup?.readySeconds);
    add('startup', n, 'writes at start-up', '', (r) => r.startup?.requests.writes);
    add('startup', n, 'reads at start-up', '', (r) => r.startup?.requests.reads);
    add('startup', n, 'peak RSS', 'MiB', (r) => r.startup?.peakRssMiB);
    add('startup', n, 'objects cached', '', (r) => r.startup?.cachedObjects);
    add('startup', n, 'RSS when idle after start-up', 'MiB', (r) => r.startup?.rssMiB);
    add('startup', n, 'heap used when idle after start-up', 'MiB', (r) => r.startup?.heapMiB);
  }
  return [...out, ...perObject(out)];
}

/**
 * What one more cached object costs: between the smallest N and each larger one, the growth of the idle
 * RSS and heap (medians) divided by the growth of the objects cached, in KiB.
 */
export function perObject(metrics: Metric[]): Metric[] {
  const find = (n: number, metric: string) =>
    metrics.find((m) => m.scenario === 'startup' && m.n === n && m.metric === metric);
  const ns = [...new Set(metrics.filter((m) => m.metric === 'objects cached').map((m) => m.n))].sort(
    (a, b) => a - b,
  );
  const out: Metric[] = [];
  const n0 = ns[0];
  if (n0 === undefined) return out;
  for (const n of ns.slice(1)) {
    for (const [figure, label] of [
      ['RSS when idle after start-up', 'RSS'],
      ['heap used when idle after start-up', 'heap'],
    ] as const) {
      const values: Metric['values'] = {};
      for (const impl of Object.keys(find(n, figure)?.values ?? {}) as ImplName[]) {
        const at = (size: number, metric: string) => {
          const v = find(size, metric)?.values[impl];
          return v?.length ? median(v) : undefined;
        };
        const [x0, x1, o0, o1] = [
          at(n0, figure),
          at(n, figure),
          at(n0, 'objects cached'),
          at(n, 'objects cached'),
        ];
        if (x0 === undefined || x1 === undefined || o0 === undefined || o1 === undefined || o1 <= o0)
          continue;
        values[impl] = [((x1 - x0) * 1024) / (o1 - o0)];
      }
      if (Object.keys(values).length) {
        out.push({
          scenario: 'memory',
          n,
          metric: `${label} per cached object, N=${n0} -> ${n}`,
          unit: 'KiB',
          values,
        });
      }
    }
  }
  return out;
}

const takesWorkers = (impl: ImplName) => DEFAULT_WORKERS[impl] !== undefined;

/**
 * Like-for-like tables first (one per worker count run, the smallest first), then defaults vs defaults.
 * Runs of implementations without a worker count (client-node, the floor) belong to the headline table.
 * A run without `workers` (including results.json files written before runs recorded it) used its
 * implementation's default.
 */
export function resultTables(rs: RunResult[]): Table[] {
  const counts = [
    ...new Set(rs.filter((r) => takesWorkers(r.impl) && r.workers).map((r) => r.workers!)),
  ].sort((a, b) => a - b);
  const shared = rs.filter((r) => !takesWorkers(r.impl));
  const tables: Table[] = counts.map((w, i) => ({
    title: `Like for like: ${w} worker${w === 1 ? '' : 's'} for every operator`,
    settings:
      `\`--workers ${w}\`: opkit and controller-runtime both run \`--max-concurrent-reconciles ${w}\`` +
      (i === 0 && shared.length
        ? '; client-node (no queue) and the floor (no controller) as they are.'
        : '.'),
    metrics: metricsOf([
      ...rs.filter((r) => takesWorkers(r.impl) && r.workers === w),
      ...(i === 0 ? shared : []),
    ]),
  }));
  const defaults = rs.filter((r) => takesWorkers(r.impl) && !r.workers);
  if (defaults.length) {
    const own = Object.entries(DEFAULT_WORKERS)
      .map(([impl, w]) => `${impl} ${w}`)
      .join(', ');
    tables.push({
      title: 'Defaults vs defaults',
      settings:
        `Each operator with its own default worker count (${own}): the difference includes the worker count, ` +
        'not only the runtime.' +
        (counts.length === 0 && shared.length ? ' client-node and the floor as they are.' : ''),
      metrics: metricsOf([...defaults, ...(counts.length === 0 ? shared : [])]),
    });
  }
  return tables;
}

/** The tables as Markdown: a heading per table (the first is the headline, with the plot), its settings. */
export function tablesMarkdown(tables: Table[], plot?: string): string {
  return tables
    .flatMap((t, i) => [
      `### ${i === 0 ? 'Headline: ' : ''}${t.title}`,
      '',
      `Settings: ${t.settings}`,
      '',
      markdownTable(t.metrics),
      '',
      ...(i === 0 && plot ? [`![convergence time and peak RSS against N (${t.title})](${plot})`, ''] : []),
    ])
    .join('\n');
}
