/**
 * Results: the machine's description, a Markdown table (median, min-max, ratio opkit / peer) and an SVG
 * plot of convergence time and peak RSS against N, drawn by hand (no plotting dependency).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';

export const IMPLS = ['opkit', 'controller-runtime', 'client-node', 'floor'] as const;
export type ImplName = (typeof IMPLS)[number];

export interface Metric {
  scenario: string;
  n: number;
  metric: string;
  unit: string;
  /** lower is better (all our figures are) */
  values: Partial<Record<ImplName, number[]>>;
}

export function machine(kubeVersion: string): Record<string, string> {
  const cpu = cpus();
  let goVersion = 'unknown';
  try {
    goVersion = execFileSync('go', ['version'], { encoding: 'utf8' })
      .trim()
      .replace(/^go version /, '');
  } catch {
    // Go is only needed to build the controller-runtime peer.
  }
  let kernel = '';
  try {
    kernel = readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim();
  } catch {}
  return {
    cpu: `${cpu.length} x ${cpu[0]?.model ?? 'unknown'}`,
    memory: `${(totalmem() / 2 ** 30).toFixed(1)} GiB`,
    kernel: `Linux ${kernel}`,
    node: process.version,
    go: goVersion,
    'kube-apiserver': kubeVersion,
  };
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function fmtNum(x: number, unit: string): string {
  if (unit === 's') return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2);
  if (unit === 'ms') return x >= 100 ? x.toFixed(0) : x.toFixed(1);
  if (unit === 'MiB') return x.toFixed(0);
  if (unit === 'KiB') return x.toFixed(1);
  if (Number.isInteger(x)) return String(x);
  return x.toFixed(2);
}

function cell(values: number[] | undefined, unit: string): string {
  if (!values || values.length === 0) return '-';
  const m = fmtNum(median(values), unit);
  if (values.length === 1) return m;
  const lo = fmtNum(Math.min(...values), unit);
  const hi = fmtNum(Math.max(...values), unit);
  return lo === hi ? m : `${m} (${lo}-${hi})`;
}

function ratio(a: number[] | undefined, b: number[] | undefined): string {
  if (!a?.length || !b?.length) return '-';
  const ma = median(a);
  const mb = median(b);
  if (mb === 0) return ma === 0 ? '1.00' : 'inf';
  return (ma / mb).toFixed(2);
}

export function markdownTable(metrics: Metric[]): string {
  const header = [
    'scenario',
    'N',
    'figure',
    'opkit',
    'controller-runtime',
    'client-node',
    'floor',
    'opkit / c-r',
    'opkit / client-node',
    'opkit / floor',
  ];
  const rows = metrics.map((m) => [
    m.scenario,
    String(m.n),
    `${m.metric}${m.unit ? ` (${m.unit})` : ''}`,
    cell(m.values.opkit, m.unit),
    cell(m.values['controller-runtime'], m.unit),
    cell(m.values['client-node'], m.unit),
    cell(m.values.floor, m.unit),
    ratio(m.values.opkit, m.values['controller-runtime']),
    ratio(m.values.opkit, m.values['client-node']),
    ratio(m.values.opkit, m.values.floor),
  ]);
  const line = (r: string[]) => `| ${r.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

const COLORS: Record<ImplName, string> = {
  opkit: '#d62728',
  'controller-runtime': '#1f77b4',
  'client-node': '#2ca02c',
  floor: '#7f7f7f',
};

/** One panel: a line per implementation over N (log scale on x when N spans a decade). */
function panel(
  title: string,
  unit: string,
  series: Partial<Record<ImplName, Array<[number, number]>>>,
  x0: number,
  y0: number,
  w: number,
  h: number,
): string {
  const pts = Object.values(series).flat();
  if (pts.length === 0) return '';
  const ns = [...new Set(pts.map((p) => p[0]))].sort((a, b) => a - b);
  const logX = ns.length > 1 && ns[ns.length - 1]! / ns[0]! >= 10;
  const fx = (n: number) => (logX ? Math.log10(n) : n);
  const xmin = fx(ns[0]!);
  const xmax = fx(ns[ns.length - 1]!);
  const ymax = Math.max(...pts.map((p) => p[1])) * 1.1 || 1;
  const left = x0 + 60;
  const right = x0 + w - 10;
  const top = y0 + 30;
  const bottom = y0 + h - 40;
  const sx = (n: number) =>
    xmax === xmin ? (left + right) / 2 : left + ((fx(n) - xmin) / (xmax - xmin)) * (right - left);
  const sy = (v: number) => bottom - (v / ymax) * (bottom - top);
  const out: string[] = [];
  out.push(`<text x="${x0 + w / 2}" y="${y0 + 18}" text-anchor="middle" font-weight="bold">${title}</text>`);
  out.push(`<line x1="${left}" y1="${bottom}" x2="${right}" y2="${bottom}" stroke="#000"/>`);
  out.push(`<line x1="${left}" y1="${top}" x2="${left}" y2="${bottom}" stroke="#000"/>`);
  for (let i = 0; i <= 4; i++) {
    const v = (ymax / 4) * i;
    const y = sy(v);
    out.push(`<line x1="${left}" y1="${y}" x2="${right}" y2="${y}" stroke="#ddd"/>`);
    out.push(`<text x="${left - 5}" y="${y + 4}" text-anchor="end" font-size="11">${fmtNum(v, unit)}</text>`);
  }
  for (const n of ns) {
    out.push(`<text x="${sx(n)}" y="${bottom + 15}" text-anchor="middle" font-size="11">${n}</text>`);
  }
  out.push(
    `<text x="${(left + right) / 2}" y="${bottom + 32}" text-anchor="middle" font-size="12">N (Databases)</text>`,
  );
  out.push(
    `<text x="${x0 + 14}" y="${(top + bottom) / 2}" text-anchor="middle" font-size="12" transform="rotate(-90 ${x0 + 14} ${(top + bottom) / 2})">${unit}</text>`,
  );
  for (const [impl, s] of Object.entries(series) as Array<[ImplName, Array<[number, number]>]>) {
    const sorted = [...s].sort((a, b) => a[0] - b[0]);
    const d = sorted.map((p, i) => `${i ? 'L' : 'M'}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(' ');
    const dash = impl === 'floor' ? ' stroke-dasharray="6 4"' : '';
    out.push(`<path d="${d}" fill="none" stroke="${COLORS[impl]}" stroke-width="2"${dash}/>`);
    for (const p of sorted) {
      out.push(
        `<circle cx="${sx(p[0]).toFixed(1)}" cy="${sy(p[1]).toFixed(1)}" r="3" fill="${COLORS[impl]}"/>`,
      );
    }
  }
  return out.join('\n');
}

export function svgPlot(metrics: Metric[]): string {
  const series = (name: string) => {
    const out: Partial<Record<ImplName, Array<[number, number]>>> = {};
    for (const m of metrics.filter((x) => x.scenario === 'convergence' && x.metric === name)) {
      for (const impl of IMPLS) {
        const v = m.values[impl];
        if (v?.length) out[impl] = [...(out[impl] ?? []), [m.n, median(v)]];
      }
    }
    return out;
  };
  const W = 900;
  const H = 360;
  const legend = IMPLS.map(
    (impl, i) =>
      `<rect x="${60 + i * 190}" y="${H - 16}" width="14" height="4" fill="${COLORS[impl]}"/>` +
      `<text x="${80 + i * 190}" y="${H - 10}" font-size="12">${impl}</text>`,
  ).join('\n');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    panel('Convergence time', 's', series('convergence time'), 0, 0, W / 2, H - 30),
    panel('Peak RSS of the operator', 'MiB', series('peak RSS'), W / 2, 0, W / 2, H - 30),
    legend,
    '</svg>',
  ].join('\n');
}
