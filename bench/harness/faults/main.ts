/**
 * The fault suite: each fault against the Database operator (its own process, exactly config/rbac,
 * through a TCP proxy of ours on loopback), a fresh control plane per fault, and one table.
 *
 *   npm run bench:faults                                  # every fault, N=200, apiserver mode
 *   npm run bench:faults -- --faults baseline,proxy-half-open --n 50
 *   npm run bench:faults -- --mode cluster --faults baseline,apiserver-restart
 *   npm run bench:faults -- --mode real-nodes --n 20   # the operator deployed on a real node (root)
 *   npm run bench:faults -- --mode cluster --faults apiserver-restart --n 50 --trace --no-write
 *     (--trace: a timeline every 2 s, and the control plane's logs kept under the work directory)
 *
 * Writes the table to bench/results/faults.md (--out FILE to choose, --no-write to print only).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { FAULT_MODES, type FaultMode, type FaultName, FULL_SCALE, faultsOf } from './faults.ts';
import { buildOperatorImage } from './in-cluster.ts';
import { type FaultResult, runFault } from './run.ts';
import { faultTable } from './table.ts';

const { values } = parseArgs({
  options: {
    faults: { type: 'string' },
    n: { type: 'string', default: '200' },
    mode: { type: 'string', default: 'apiserver' },
    'timeout-seconds': { type: 'string', default: '600' },
    'reaction-timeout-seconds': { type: 'string', default: '180' },
    out: { type: 'string', default: resolve(import.meta.dirname, '..', '..', 'results', 'faults.md') },
    'no-write': { type: 'boolean', default: false },
    notes: { type: 'string', default: '' },
    trace: { type: 'boolean', default: false },
  },
});

const log = (line: string) => process.stderr.write(`${line}\n`);
if (!FAULT_MODES.includes(values.mode as FaultMode))
  throw new Error(`--mode ${values.mode}: one of ${FAULT_MODES.join(', ')}`);
const mode = values.mode as FaultMode;
const known = faultsOf(mode);
const faults = (values.faults ?? known.join(',')).split(',') as FaultName[];
for (const f of faults)
  if (!known.includes(f)) throw new Error(`fault ${f} is not one of ${mode} mode's: ${known.join(', ')}`);
const n = Number(values.n);
const reactionTimeoutS = Number(values['reaction-timeout-seconds']);
const work = mkdtempSync(join(tmpdir(), 'opkit-faults-'));
// real-nodes: the operator's image, built once for every fault of the run (opkit build, ~15 s warm).
const imageArchive = mode === 'real-nodes' ? await buildOperatorImage(work) : undefined;
const results: FaultResult[] = [];
for (const fault of faults) {
  log(`fault ${fault} (${mode}, N=${n})`);
  const r = await runFault({
    fault,
    n,
    mode,
    workDir: join(work, fault),
    scale: FULL_SCALE,
    convergeTimeoutMs: Number(values['timeout-seconds']) * 1000,
    reactionTimeoutMs: reactionTimeoutS * 1000,
    log,
    trace: values.trace,
    ...(imageArchive ? { imageArchive } : {}),
  });
  log(
    `  ${r.converged}/${r.n} converged in ${r.seconds.toFixed(1)} s, reaction ${r.reactionSeconds?.toFixed(2) ?? 'none'} s, ` +
      `log ${JSON.stringify(r.logLines)}${r.failed ? `, FAILED ${r.failed}` : ''}`,
  );
  results.push(r);
}
const table = faultTable(results, reactionTimeoutS);
const doc = `# Fault suite

\`npm run bench:faults -- --n ${n} --mode ${mode}\` on ${new Date().toISOString().slice(0, 16)} UTC, ${cpus().length} cores
(${cpus()[0]?.model ?? 'unknown CPU'}). N Databases (mysql/postgres, replicas 1-3), the operator as its own
process with exactly config/rbac (a ServiceAccount token), through the fault proxy (bench/harness/faults/proxy.ts);
a fresh control plane per fault. "reaction after fault": a spec.replicas change made once the fault is over
and every Database converged (for proxy-half-open: at once, while the old connections stay half-open), until
the StatefulSet follows.
${values.notes ? `\n${values.notes}\n` : ''}
${table}
`;
process.stdout.write(`${doc}\n`);
if (!values['no-write']) {
  writeFileSync(values.out, doc);
  log(`wrote ${values.out}; work files in ${work}`);
}
