/**
 * Control plane benchmarks: warm start time of each mode (median of several runs), and with --cold the
 * cold install time (a build with empty Go build and module caches in a temporary directory).
 *   npm run bench:controlplane [-- --runs 5] [-- --cold] [-- --real-nodes]  (real nodes: root, see real-nodes.ts)
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { install, start } from '@opkit/controlplane';
import { realNodeTimes } from './real-nodes.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    cold: { type: 'boolean', default: false },
    'real-nodes': { type: 'boolean', default: false },
  },
});
const runs = Number(values.runs);

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const fmt = (ms: number) => (ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`);

console.log(
  `machine: ${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}`,
);
await install();

const rows: string[][] = [];
for (const mode of ['apiserver', 'cluster'] as const) {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    const cp = await start({ mode, nodes: 3 });
    times.push(performance.now() - t);
    await cp.stop();
  }
  rows.push([
    `warm start, ${mode} mode`,
    fmt(median(times)),
    `${fmt(Math.min(...times))} - ${fmt(Math.max(...times))}`,
    String(runs),
  ]);
}

if (values['real-nodes']) {
  const { starts, pods, volumePods, expansions } = await realNodeTimes(runs);
  const row = (label: string, xs: number[]) => [
    label,
    fmt(median(xs)),
    `${fmt(Math.min(...xs))} - ${fmt(Math.max(...xs))}`,
    String(xs.length),
  ];
  rows.push(row('warm start, cluster mode, 3 kwok + 1 real node', starts));
  rows.push(row('pod on the real node, create -> Ready', pods));
  rows.push(row('pod with a new 1Gi local-xfs claim, create -> Ready', volumePods));
  rows.push(row('claim expansion 1Gi -> 2Gi, request -> capacity', expansions));
}

if (values.cold) {
  const dir = mkdtempSync(join(tmpdir(), 'opkit-cold-'));
  const t = performance.now();
  const result = spawnSync(process.execPath, [join(import.meta.dirname, 'cold-install.ts')], {
    stdio: 'inherit',
    env: {
      ...process.env,
      OPKIT_CACHE_DIR: join(dir, 'opkit'),
      GOCACHE: join(dir, 'gocache'),
      GOMODCACHE: join(dir, 'gomod'),
    },
  });
  const elapsed = performance.now() - t;
  spawnSync('chmod', ['-R', 'u+w', dir]);
  rmSync(dir, { recursive: true, force: true });
  rows.push(['cold install (empty Go caches)', result.status === 0 ? fmt(elapsed) : 'failed', '-', '1']);
}

const header = ['measure', 'median', 'min - max', 'runs'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
console.log(
  [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n'),
);
