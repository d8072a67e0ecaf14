/** The fault suite's table (Markdown), one row per run, times against the no-fault baseline. */
import type { FaultResult } from './run.ts';

const num = (x: number | undefined, digits = 1) =>
  x === undefined || Number.isNaN(x) ? '-' : x.toFixed(digits);

function levels(r: FaultResult): string {
  const order = ['fatal', 'error', 'warn', 'info', 'debug'];
  const rest = Object.keys(r.logLines).filter((l) => !order.includes(l));
  return [...order, ...rest]
    .filter((l) => r.logLines[l] !== undefined)
    .map((l) => `${l} ${r.logLines[l]}`)
    .join(', ');
}

export function faultTable(results: FaultResult[], reactionTimeoutS: number): string {
  const baseline = new Map(
    results.filter((r) => r.fault === 'baseline' && !r.failed).map((r) => [r.mode, r.seconds]),
  );
  const rows = results.map((r) => {
    const base = baseline.get(r.mode);
    const vs = base && r.fault !== 'baseline' ? ` (x${(r.seconds / base).toFixed(2)})` : '';
    const reaction =
      r.reactionSeconds === undefined ? `none within ${reactionTimeoutS} s` : num(r.reactionSeconds, 2);
    return [
      r.fault,
      r.mode,
      `${r.converged}/${r.n}`,
      `${num(r.seconds)}${vs}`,
      String(r.secretsRegenerated),
      String(r.orphans),
      String(r.crashes),
      num(r.takeoverSeconds, 2),
      reaction,
      levels(r),
      String(r.eventsLost),
      [...r.notes, ...(r.failed ? [`FAILED: ${r.failed}`] : [])].join('; ').replace(/\|/g, '/'),
    ];
  });
  const head = [
    'fault',
    'mode',
    'converged',
    'time s (vs baseline)',
    'Secrets regenerated',
    'orphans',
    'crashes',
    'takeover s',
    'reaction after fault s',
    'log lines by level',
    'Events lost',
    'what happened',
  ];
  return [head, head.map(() => '---'), ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
}
