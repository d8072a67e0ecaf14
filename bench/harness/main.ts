/**
 * opkit's operator benchmark: opkit's Database operator against the same reconciler on controller-runtime
 * (Go) and on plain @kubernetes/client-node, and the floor (the same writes with no controller).
 *
 *   npm run bench -- --scenario all --n 100,1000 --runs 3
 *   npm run bench -- --scenario convergence --n 100 --impls opkit,controller-runtime
 *   npm run bench -- --scenario equivalence
 *
 * Scenarios: equivalence, convergence, steady, latency, startup, e2e (cluster mode), floor, all.
 * Results go to bench/results/<date>/ (results.md, results.json, plot.svg) and bench/results/latest.md.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { compareSnapshots, type EquivalenceReport } from './equivalence.ts';
import { buildGoPeer, deployedNodeFlags, flagList, warmCompileCache } from './impls.ts';
import { IMPLS, type ImplName, machine, svgPlot } from './report.ts';
import { type Phase, type RunResult, runOnce } from './scenarios.ts';
import { DEFAULT_WORKERS, resultTables, tablesMarkdown } from './tables.ts';

const { values } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'all' },
    /** Default 100; the memory scenario's default is 100,1000,3000. */
    n: { type: 'string' },
    runs: { type: 'string', default: '3' },
    impls: { type: 'string', default: IMPLS.join(',') },
    'steady-seconds': { type: 'string', default: '60' },
    /** The operators' resync period in runs that measure the steady state (their default is 10h). */
    'sync-period': { type: 'string', default: '30s' },
    'latency-changes': { type: 'string', default: '200' },
    'writer-concurrency': { type: 'string', default: '32' },
    'e2e-n': { type: 'string', default: '20' },
    'timeout-seconds': { type: 'string', default: '900' },
    'cpu-prof': { type: 'boolean', default: false },
    /** --max-concurrent-reconciles for opkit and controller-runtime alike: the headline (like for like). */
    workers: { type: 'string', default: '2' },
    /** Also run opkit and controller-runtime with their own defaults (2 and 1): the second table. */
    'with-defaults': { type: 'boolean', default: false },
    /** Node flags for opkit instead of those of its image's ENTRYPOINT, e.g. "" or "--max-semi-space-size=4". */
    'opkit-node-flags': { type: 'string' },
    /**
     * Environment for opkit only, e.g. "OPKIT_TRANSPORT=http2" (comma-separated KEY=VALUE pairs), over its
     * image's (`ENV` in its Dockerfile: MALLOC_ARENA_MAX=0 runs it with glibc's default arenas).
     */
    'opkit-env': { type: 'string' },
    /**
     * The controller-runtime peer talks JSON for built-in kinds too, as opkit does (controller-runtime's
     * default is protobuf for them; experiments: the results say so).
     */
    'peer-json': { type: 'boolean', default: false },
    /**
     * More flags for the controller-runtime peer, space-separated, e.g. "--zap-log-level=5" (its debug log,
     * each reconcile and status write; diagnostics: with --opkit-env LOG_LEVEL=debug for opkit's).
     */
    'peer-args': { type: 'string' },
    out: { type: 'string' },
    'no-latest': { type: 'boolean', default: false },
    /** Leave out the equivalence check that otherwise runs before every scenario (experiments only). */
    'skip-equivalence': { type: 'boolean', default: false },
    /** Rewrite the report (table, plot, latest.md) from results.json files, without running anything. */
    from: { type: 'string' },
    /** A Markdown file appended to the report (the analysis of the figures). */
    notes: { type: 'string' },
  },
});

const log = (line: string) => process.stderr.write(`${line}\n`);
if (values['peer-json'] && !values['no-latest'])
  throw new Error(
    '--peer-json is an experiment: add --no-latest (latest.md compares with the peer as it is by default)',
  );

/** "A=1,B=2" -> { A: '1', B: '2' }; a pair without "=" or with an empty name is an error. */
function parseEnvPairs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of text.split(',').filter((p) => p.length > 0)) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`--opkit-env: expected KEY=VALUE pairs separated by commas, got "${pair}"`);
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}
const scenario = values.scenario;
const ns = (values.n ?? (scenario === 'memory' ? '100,1000,3000' : '100')).split(',').map(Number);
const runs = Number(values.runs);
const impls = values.impls.split(',') as ImplName[];
if (!Number.isInteger(Number(values.workers)) || Number(values.workers) < 1)
  throw new Error(`--workers must be a positive integer, got ${values.workers}`);
for (const i of impls) if (!IMPLS.includes(i)) throw new Error(`unknown implementation ${i}`);
const benchDir = resolve(import.meta.dirname, '..');
const date = values.out ? basename(values.out) : new Date().toISOString().slice(0, 16).replace(/[:T]/g, '-');
const outDir = values.out ? resolve(values.out) : join(benchDir, 'results', date);
const workRoot = mkdtempSync(join(tmpdir(), 'opkit-bench-'));

const PHASES: Record<string, Phase[]> = {
  convergence: ['convergence'],
  floor: ['convergence'],
  steady: ['convergence', 'steady'],
  latency: ['convergence', 'latency'],
  startup: ['convergence', 'startup'],
  e2e: ['e2e'],
  /** The floor writes N Databases, then each operator starts with them present: what it holds per object. */
  memory: ['populate', 'startup'],
  all: ['convergence', 'steady', 'latency', 'startup'],
};

const common: Omit<Parameters<typeof runOnce>[0], 'impl' | 'n' | 'phases' | 'workDir'> & { workers: number } =
  {
    writerConcurrency: Number(values['writer-concurrency']),
    steadySeconds: Number(values['steady-seconds']),
    syncPeriod: values['sync-period'],
    latencyChanges: Number(values['latency-changes']),
    convergeTimeoutMs: Number(values['timeout-seconds']) * 1000,
    cpuProf: values['cpu-prof'],
    workers: Number(values.workers),
    ...(values['peer-json'] ? { peerJson: true } : {}),
    ...(values['peer-args'] !== undefined ? { peerArgs: flagList(values['peer-args']) } : {}),
    ...(values['opkit-node-flags'] !== undefined
      ? { opkitNodeFlags: flagList(values['opkit-node-flags']) }
      : {}),
    log,
  };

const results: RunResult[] = [];
let equivalence: EquivalenceReport[] | undefined;
let kubeVersion = 'unknown';

async function runEquivalence(): Promise<EquivalenceReport[]> {
  log('equivalence check: 6 Databases (mysql/postgres x 1/2/3 replicas) through each implementation');
  const snaps: Partial<Record<ImplName, Record<string, unknown>>> = {};
  for (const impl of IMPLS) {
    const r = await runOnce({
      ...common,
      impl,
      n: 6,
      phases: ['convergence'],
      workDir: join(workRoot, `equivalence-${impl}`),
      snapshot: true,
      cpuProf: false,
    });
    kubeVersion = r.kubeVersion;
    snaps[impl] = r.snapshot ?? {};
  }
  const reports = IMPLS.filter((i) => i !== 'opkit').map((impl) =>
    compareSnapshots('opkit', snaps.opkit ?? {}, impl, snaps[impl] ?? {}),
  );
  for (const r of reports) {
    log(
      `  ${r.impl} vs opkit: ${r.childDiffs.length ? `${r.childDiffs.length} child differences` : 'children identical'}, ` +
        `${r.statusDiffs.length ? `${r.statusDiffs.length} status differences` : 'status identical'}`,
    );
    for (const l of [...r.childDiffs, ...r.statusDiffs].slice(0, 20)) log(`    ${l}`);
    for (const [name, lines] of Object.entries(r.knownDiffs ?? {})) {
      log(`    known difference: ${name} (${lines.length} differences)`);
    }
  }
  writeFileSync(join(workRoot, 'equivalence.json'), JSON.stringify({ snaps, reports }, null, 1));
  return reports;
}

/** A run that fails (an implementation that never converges, say) is recorded, and the benchmark goes on. */
async function runOrRecord(opts: Parameters<typeof runOnce>[0]): Promise<RunResult> {
  try {
    return await runOnce(opts);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    log(`  ${opts.impl} N=${opts.n} failed: ${message}`);
    return { impl: opts.impl, n: opts.n, kubeVersion, failures: [message] };
  }
}

function failuresSection(): string[] {
  const lines = results.flatMap((r) =>
    [...(r.failures ?? []), ...(r.latency?.failed ? [`latency: ${r.latency.failed}`] : [])].map(
      (f) => `- ${r.impl}, N=${Math.abs(r.n)}${r.n < 0 ? ' (cluster mode)' : ''}: ${f.split('\n')[0]}`,
    ),
  );
  return lines.length ? ['## Failures', '', ...lines, ''] : [];
}

/** The commit the figures are of, and whether the working tree had changes on top of it. */
function commitOf(): string {
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: benchDir, encoding: 'utf8' }).trim();
    const dirty = git(
      'status',
      '--porcelain',
      '--untracked-files=no',
      '--',
      '.',
      '../packages',
      '../operators',
    );
    return `${git('rev-parse', 'HEAD')}${dirty ? ' (with uncommitted changes)' : ''}`;
  } catch {
    return 'unknown (not a git checkout)';
  }
}
const commit = values.from ? 'see the results.json files' : commitOf();

function writeResults() {
  mkdirSync(outDir, { recursive: true });
  const tables = resultTables(results);
  const m = machine(kubeVersion);
  const byRun = results.map((r) => ({ ...r, snapshot: undefined }));
  writeFileSync(
    join(outDir, 'results.json'),
    `${JSON.stringify({ machine: m, commit, results: byRun, equivalence }, null, 1)}\n`,
  );
  // The plot shows the headline (like-for-like) figures.
  const svg = svgPlot(tables[0]?.metrics ?? []);
  writeFileSync(join(outDir, 'plot.svg'), svg);
  const eq = equivalence
    ? equivalence
        .map(
          (r) =>
            `- ${r.impl} vs opkit: ${r.childDiffs.length === 0 ? 'children identical' : `**${r.childDiffs.length} child differences**`}` +
            `, ${r.statusDiffs.length === 0 ? 'status identical' : `${r.statusDiffs.length} status differences`}` +
            [...r.childDiffs, ...r.statusDiffs]
              .slice(0, 12)
              .map((l) => `\n  - \`${l}\``)
              .join('') +
            Object.entries(r.knownDiffs ?? {})
              .map(([name, lines]) => `\n  - known difference: ${name} (${lines.length} differences)`)
              .join(''),
        )
        .join('\n')
    : '- not run in this invocation';
  const md = [
    `# Operator benchmark results (${date})`,
    '',
    ...(values.from ? [] : [`Command: \`npm run bench -- ${process.argv.slice(2).join(' ')}\``, '']),
    ...(values['peer-json']
      ? [
          '**The controller-runtime peer ran with `--content-type=application/json`** (`--peer-json`): JSON for every',
          'kind, as opkit. Its default is protobuf for built-in kinds.',
          '',
        ]
      : []),
    `Commit: ${commit}`,
    '',
    '## Machine',
    '',
    ...Object.entries(m).map(([k, v]) => `- ${k}: ${v}`),
    '',
    '## Equivalence check (before timing)',
    '',
    eq,
    '',
    '## Results',
    '',
    `Median of ${runs} run(s) (min-max in parentheses); ratios are of medians. Lower is better everywhere.`,
    "Requests are the operator's own: apiserver_request_total (after - before) minus the requests the",
    'harness itself made in the window, which it counts exactly. Writes = POST, PUT, PATCH, DELETE;',
    'reads = GET, LIST (watches are long-running and not counted). Events (events.k8s.io) are writes too.',
    '',
    tablesMarkdown(tables, 'plot.svg'),
    '',
    ...failuresSection(),
    ...(values.notes ? [readFileSync(values.notes, 'utf8')] : []),
  ].join('\n');
  writeFileSync(join(outDir, 'results.md'), md);
  if (!values['no-latest']) {
    const rel = outDir.startsWith(join(benchDir, 'results'))
      ? outDir.slice(join(benchDir, 'results').length + 1)
      : outDir;
    writeFileSync(
      join(benchDir, 'results', 'latest.md'),
      md
        .replace('](plot.svg)', `](${rel}/plot.svg)`)
        .replace(/^# .*$/m, (h) => `${h}\n\nFull results: [${rel}/results.md](${rel}/results.md)`),
    );
  }
  log(`results written to ${outDir}`);
}

if (values.from) {
  // Comma-separated results.json files, merged (e.g. a full run at N=100 and a convergence run at N=1000).
  for (const file of values.from.split(',')) {
    const saved = JSON.parse(readFileSync(file, 'utf8')) as {
      machine: Record<string, string>;
      results: RunResult[];
      equivalence?: EquivalenceReport[];
    };
    results.push(...saved.results);
    kubeVersion = saved.results.find((r) => r.kubeVersion !== 'unknown')?.kubeVersion ?? kubeVersion;
    equivalence ??= saved.equivalence;
  }
  writeResults();
  process.exit(0);
}

try {
  // The peers take the engine content from opkit's builders as they are now.
  const { generateTemplates } = await import('../operators/gen-templates.ts');
  await generateTemplates();
  if (impls.includes('controller-runtime')) buildGoPeer(log);
  // As the image's build does: Node's compile cache warmed before opkit's first start.
  const opkitEnv = warmCompileCache(
    join(workRoot, 'node-compile-cache'),
    common.opkitNodeFlags ?? deployedNodeFlags(),
  );
  if (opkitEnv) {
    common.opkitEnv = opkitEnv;
    log('opkit: Node compile cache warmed (NODE_COMPILE_CACHE, as in its image)');
  }
  if (values['opkit-env']) {
    const extra = parseEnvPairs(values['opkit-env']);
    common.opkitEnv = { ...(common.opkitEnv ?? process.env), ...extra };
    log(
      `opkit: environment ${Object.entries(extra)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
    );
  }
  // Before any timing: the implementations must create the same objects for the figures to compare.
  if (!values['skip-equivalence']) equivalence = await runEquivalence();
  if (scenario === 'equivalence') {
    // The check alone is no timing: printed above, kept in the work directory, never the headline latest.md.
    log('equivalence checked: nothing written under bench/results (a check is not a timing run)');
    if (equivalence?.some((r) => r.childDiffs.length > 0 || r.statusDiffs.length > 0)) process.exitCode = 1;
  } else {
    const phases = PHASES[scenario];
    if (!phases) throw new Error(`unknown scenario ${scenario}`);
    const list: ImplName[] =
      scenario === 'floor' ? ['floor'] : scenario === 'memory' ? impls.filter((i) => i !== 'floor') : impls;
    const sizes = scenario === 'e2e' ? values['e2e-n'].split(',').map(Number) : ns;
    for (const n of sizes) {
      for (let run = 0; run < runs; run++) {
        // Implementations interleaved run by run, so slow drift of the machine hits them alike.
        // With --with-defaults, opkit and controller-runtime run a second time each with their own defaults.
        const order = [
          ...list.map((impl) => ({ impl, defaults: false })),
          ...(values['with-defaults']
            ? list
                .filter((impl) => DEFAULT_WORKERS[impl] !== undefined)
                .map((impl) => ({ impl, defaults: true }))
            : []),
        ];
        for (const { impl, defaults } of order) {
          const settings = defaults ? 'its default workers' : `--workers ${common.workers}`;
          log(`run ${run + 1}/${runs}: ${impl} (${settings}), N=${n}, ${phases.join(' + ')}`);
          const { workers, ...rest } = common;
          const r = await runOrRecord({
            ...rest,
            ...(defaults ? {} : { workers }),
            impl,
            n,
            phases: impl === 'floor' ? ['convergence'] : phases,
            workDir: join(workRoot, `${impl}-${n}-${run}${defaults ? '-defaults' : ''}`),
            ...(scenario === 'e2e' ? { cluster: { nodes: Math.max(3, Math.ceil(n / 20)) } } : {}),
          });
          kubeVersion = r.kubeVersion;
          results.push(r);
          writeResults();
        }
      }
    }
    if (scenario === 'all' && values['e2e-n'] !== '0') {
      for (const n of values['e2e-n'].split(',').map(Number)) {
        for (const impl of impls.filter((i) => i !== 'floor')) {
          log(`e2e (cluster mode): ${impl}, N=${n}`);
          const r = await runOrRecord({
            ...common,
            impl,
            n,
            phases: ['e2e'],
            workDir: join(workRoot, `e2e-${impl}-${n}`),
            cluster: { nodes: Math.max(3, Math.ceil(n / 20)) },
          });
          results.push({ ...r, n: -n });
          writeResults();
        }
      }
    }
    writeResults();
  }
  log(`work files (operator logs, profiles): ${workRoot}`);
} catch (err) {
  log(`benchmark failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  log(`work files (operator logs): ${workRoot}`);
  process.exitCode = 1;
}
