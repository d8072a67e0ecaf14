/**
 * Start-up to ready, many times over one populated control plane: the harness writes N Databases, their
 * children and status (the floor's writes, no operator), then starts each implementation in turn,
 * interleaved, `--rounds` times: time from spawn to its first 200 on /readyz (every informer synced) and
 * its CPU by then (all threads, and the main thread's part: for Node the rest is V8's garbage collector
 * and optimizing compiler, and libuv's pool), and its peak RSS 4 s after ready, when its start-up reconciles
 * have run. The full benchmark measures this once per run, each on a fresh control plane; this
 * gives the spread of many starts at the cost of a few seconds each, and A/B runs of two opkit builds
 * (`--impls opkit,opkit=/path/to/other/main.js`; copy the other build next to dist/main.js) or of one build
 * with a different environment (`--impls opkit,opkit+OPKIT_WIRE_FORMAT=json`) or Node flags
 * (`--impls "opkit,opkit+NODE_FLAGS=--max-semi-space-size=4 --minor-ms"`: instead of the image's).
 *
 *   node bench/harness/startup-loop.ts --n 1000 --rounds 8 --impls opkit,controller-runtime
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { start } from '@opkit/controlplane';
import { readBinaryResidency } from './binary-residency.ts';
import { inputs } from './desired.ts';
import {
  buildGoPeer,
  deployedNodeFlags,
  flagList,
  OPKIT_DOCKERFILE,
  opkitMain,
  startOperator,
  waitReady,
  warmCompileCache,
} from './impls.ts';
import { Kube, runConcurrently } from './kube.ts';
import { diffCounts, scrapeNodeHeap, scrapeRequestCounts, summarize } from './metrics.ts';
import { readRssByMapping, readThreadCpu } from './proc.ts';
import { median } from './report.ts';
import { floorWrite, installCrd, SCALE_FLAGS } from './scenarios.ts';

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '6' },
    impls: { type: 'string', default: 'opkit,controller-runtime' },
    workers: { type: 'string', default: '2' },
    'peer-json': { type: 'boolean', default: false },
    /** Log each start's resident memory by mapping (the node binary, V8's heap and malloc's arenas, ...). */
    'rss-by-mapping': { type: 'boolean', default: false },
    /** Node flags for every opkit entry instead of those of its image's ENTRYPOINT (experiments). */
    'opkit-node-flags': { type: 'string' },
    /** Keep each started process this many seconds longer, its pid logged, to inspect it (gdb, /proc). */
    hold: { type: 'string', default: '0' },
  },
});
const opkitNodeFlags =
  values['opkit-node-flags'] !== undefined ? flagList(values['opkit-node-flags']) : deployedNodeFlags();
const n = Number(values.n);
const rounds = Number(values.rounds);
const workers = Number(values.workers);
const log = (line: string) => process.stderr.write(`${line}\n`);
const NODE_FLAGS = 'NODE_FLAGS';

interface Impl {
  label: string;
  impl: 'opkit' | 'controller-runtime';
  script?: string;
  env?: NodeJS.ProcessEnv;
  nodeFlags?: string[];
}
/** "a=b=c" -> ["a", "b=c"]; "a" -> ["a", undefined]. */
function splitOnce(s: string): [string, string | undefined] {
  const i = s.indexOf('=');
  return i === -1 ? [s, undefined] : [s.slice(0, i), s.slice(i + 1)];
}

const work = mkdtempSync(join(tmpdir(), 'opkit-startup-loop-'));
const impls: Impl[] = (values.impls ?? '').split(',').map((full, i) => {
  const [spec = '', ...envPairs] = full.split('+');
  const extraEnv: Record<string, string | undefined> = Object.fromEntries(
    envPairs.map((pair) => splitOnce(pair)),
  );
  // NODE_FLAGS is not passed on: its value replaces the Node flags of this entry (V8 flags that NODE_OPTIONS refuses).
  const flags = NODE_FLAGS in extraEnv ? flagList(extraEnv[NODE_FLAGS] ?? '') : opkitNodeFlags;
  delete extraEnv[NODE_FLAGS];
  const [name, path] = splitOnce(spec);
  if (name === 'controller-runtime') return { label: name, impl: name };
  if (name !== 'opkit') throw new Error(`--impls: unknown implementation ${name}`);
  const script = path ? resolve(path) : opkitMain(log);
  // As the image does: Node's compile cache warmed for this script, with the flags it runs with.
  const base: NodeJS.ProcessEnv | undefined = Object.keys(extraEnv).length
    ? { ...process.env, ...extraEnv }
    : undefined;
  const cacheDir = join(work, `cc-${i}-${basename(script)}`);
  const env = warmCompileCache(cacheDir, flags, OPKIT_DOCKERFILE, script, base ?? process.env) ?? base;
  const label = `${path ? `opkit=${basename(script)}` : 'opkit'}${envPairs.map((e) => `+${e}`).join('')}`;
  return { label, impl: 'opkit', script, nodeFlags: flags, ...(env ? { env } : {}) };
});
if (impls.some((i) => i.impl === 'controller-runtime')) buildGoPeer(log);

const cp = await start({ mode: 'apiserver', apiServerArgs: SCALE_FLAGS });
const kube = new Kube(cp.kubeconfig, { maxSockets: 64 });
const results = new Map<
  string,
  { ready: number[]; cpu: number[]; main: number[]; writes: number[]; rss: number[] }
>(impls.map((i) => [i.label, { ready: [], cpu: [], main: [], writes: [], rss: [] }]));
try {
  await installCrd(kube);
  const t0 = performance.now();
  await runConcurrently(inputs(n, 'default'), 32, (db) => floorWrite(kube, 'default', db));
  log(`populated N=${n} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  await new Promise((r) => setTimeout(r, 3000));
  for (let round = 0; round < rounds; round++) {
    for (const impl of impls) {
      const before = await scrapeRequestCounts(kube);
      const op = await startOperator(impl.impl, {
        kubeconfigPath: cp.kubeconfigPath,
        logFile: join(work, `${impl.label.replace(/[^\w.-]/g, '_')}-${round}.log`),
        workers,
        opkitNodeFlags: impl.nodeFlags ?? opkitNodeFlags,
        ...(impl.script ? { opkitScript: impl.script } : {}),
        ...(impl.env ? { opkitEnv: impl.env } : {}),
        ...(values['peer-json'] ? { peerJson: true } : {}),
      });
      const tReady = await waitReady(op);
      const cpu = op.proc.sample().cpuSeconds;
      const threads =
        op.proc.child.pid === undefined ? new Map<string, number>() : readThreadCpu(op.proc.child.pid);
      // Its start-up reconciles (no writes expected) run before the next start.
      await new Promise((r) => setTimeout(r, 4000));
      const after = await scrapeRequestCounts(kube);
      const peakRss = op.proc.sample().hwmBytes / 2 ** 20;
      if (values['rss-by-mapping'] && op.proc.child.pid !== undefined) {
        const top = readRssByMapping(op.proc.child.pid).slice(0, 8);
        log(
          `  resident by mapping (MiB): ${top.map(([m, b]) => `${m} ${(b / 2 ** 20).toFixed(1)}`).join(', ')}`,
        );
        const binary = readBinaryResidency(op.proc.child.pid);
        log(
          `  the binary's resident pages (MiB): ${binary.groups
            .slice(0, 10)
            .map(([g, b]) => `${g} ${(b / 2 ** 20).toFixed(1)}`)
            .join(', ')}`,
        );
        // V8's heap as prom-client's default metrics see it: what of [anon] is V8's.
        const heap = impl.impl === 'opkit' ? await scrapeNodeHeap(op.metricsPort) : undefined;
        if (heap) {
          const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
          log(
            `  V8 heap (MiB): total ${mib(heap.total)}, used ${mib(heap.used)} ` +
              `(${heap.spaces.map(([space, bytes]) => `${space} ${mib(bytes)}`).join(', ')}); external ${mib(heap.external)}`,
          );
        }
      }
      if (Number(values.hold) > 0) {
        log(`  ${impl.label} is pid ${op.proc.child.pid}: held for ${values.hold} s`);
        await new Promise((r) => setTimeout(r, Number(values.hold) * 1000));
      }
      await op.proc.stop();
      const { writes } = summarize(diffCounts(after, before));
      const r = results.get(impl.label)!;
      r.ready.push((tReady - op.startedAt) / 1000);
      r.cpu.push(cpu);
      r.main.push(threads.get('main') ?? Number.NaN);
      r.writes.push(writes);
      r.rss.push(peakRss);
      log(
        `round ${round + 1} ${impl.label}: ready in ${((tReady - op.startedAt) / 1000).toFixed(2)} s, ` +
          `CPU ${cpu.toFixed(2)} s by then (main thread ${(threads.get('main') ?? Number.NaN).toFixed(2)} s; ` +
          `${[...threads]
            .filter(([n]) => n !== 'main' && (threads.get(n) ?? 0) > 0)
            .map(([n, c]) => `${n} ${c.toFixed(2)}`)
            .join(', ')}), ${writes} writes, peak RSS ${peakRss.toFixed(0)} MiB`,
      );
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
} finally {
  kube.close();
  await cp.stop();
}
const range = (xs: number[]) => `${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)}`;
const first = results.get(impls[0]!.label)!;
console.log(`N=${n}, ${rounds} interleaved rounds, --max-concurrent-reconciles ${workers}\n`);
console.log(
  `| implementation | ready (s), median | range | CPU by ready (s) | of it, main thread (s) | peak RSS (MiB) | writes | ${impls[0]!.label} / this, ready |`,
);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
for (const [label, r] of results) {
  console.log(
    `| ${label} | ${median(r.ready).toFixed(2)} | ${range(r.ready)} | ${median(r.cpu).toFixed(2)} | ` +
      `${median(r.main).toFixed(2)} | ${median(r.rss).toFixed(0)} | ` +
      `${Math.max(...r.writes)} | ${(median(first.ready) / median(r.ready)).toFixed(2)} |`,
  );
}
