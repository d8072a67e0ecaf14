/**
 * Summarizes V8 CPU profiles (node --cpu-prof): self time by function and by package/area.
 *   node bench/harness/profile.ts <file.cpuprofile|dir> [--top 25]
 *   node bench/harness/profile.ts <file.cpuprofile|dir> --callers '^getName$' [--depth 4]
 * --until <ms> keeps only the samples of the profile's first <ms> milliseconds (e.g. a start-up until ready).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

function area(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native/V8)';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1]!;
  if (url.startsWith('node:')) return url.split('/')[0]!;
  const m = /\/(packages\/[^/]+\/src\/[^/]+|operators\/[^/]+\/src\/[^/]+|bench\/[^/]+)/.exec(url);
  return m ? m[1]! : url;
}

/** How many of `p`'s samples were taken within its first `untilMs` milliseconds (all of them if undefined). */
function sampleCount(p: Profile, untilMs: number | undefined): number {
  if (untilMs === undefined) return p.samples.length;
  let t = 0;
  for (let i = 0; i < p.samples.length; i++) {
    t += (p.timeDeltas[i] ?? 0) / 1000;
    if (t > untilMs) return i;
  }
  return p.samples.length;
}

export function summarize(files: string[], top = 25, untilMs?: number): string {
  const byFn = new Map<string, number>();
  const byArea = new Map<string, number>();
  let total = 0;
  for (const f of files) {
    const p = JSON.parse(readFileSync(f, 'utf8')) as Profile;
    const nodes = new Map(p.nodes.map((n) => [n.id, n]));
    const count = sampleCount(p, untilMs);
    for (let i = 0; i < count; i++) {
      const n = nodes.get(p.samples[i]!);
      const dt = (p.timeDeltas[i] ?? 0) / 1000;
      if (!n) continue;
      total += dt;
      const cf = n.callFrame;
      if (cf.functionName === '(idle)') continue;
      const where = cf.url
        ? `${cf.url.replace(/^file:\/\/.*?\/(node_modules|packages|operators|bench)\//, '$1/')}:${cf.lineNumber + 1}`
        : '';
      const key = `${cf.functionName || '(anonymous)'} ${where}`;
      byFn.set(key, (byFn.get(key) ?? 0) + dt);
      const a = area(cf.url, cf.functionName);
      byArea.set(a, (byArea.get(a) ?? 0) + dt);
    }
  }
  const idle = total - [...byArea.values()].reduce((a, b) => a + b, 0);
  const busy = total - idle;
  const fmt = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, v]) => `${v.toFixed(0).padStart(7)} ms ${((v / busy) * 100).toFixed(1).padStart(5)}%  ${k}`)
      .join('\n');
  return [
    `profiled ${(total / 1000).toFixed(1)} s, busy ${(busy / 1000).toFixed(1)} s`,
    '',
    'self time by area:',
    fmt(byArea),
    '',
    'self time by function:',
    fmt(byFn),
  ].join('\n');
}

/**
 * Who calls the functions whose name matches `pattern`: time of the samples in them (self and below), by
 * the `depth` frames above them, heaviest first.
 */
export function callers(files: string[], pattern: RegExp, depth = 4, top = 15, untilMs?: number): string {
  const byStack = new Map<string, number>();
  let total = 0;
  for (const f of files) {
    const p = JSON.parse(readFileSync(f, 'utf8')) as Profile;
    const parent = new Map<number, number>();
    for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    const nodes = new Map(p.nodes.map((n) => [n.id, n]));
    const label = (n: Node) => {
      const cf = n.callFrame;
      const file = cf.url.replace(/^.*\/(packages|operators|bench|node_modules)\//, '$1/');
      return `${cf.functionName || '(anonymous)'} ${file}:${cf.lineNumber + 1}`;
    };
    const count = sampleCount(p, untilMs);
    for (let i = 0; i < count; i++) {
      let id: number | undefined = p.samples[i];
      const dt = (p.timeDeltas[i] ?? 0) / 1000;
      // the innermost matching frame of this sample's stack
      while (id !== undefined && !pattern.test(nodes.get(id)?.callFrame.functionName ?? ''))
        id = parent.get(id);
      if (id === undefined) continue;
      total += dt;
      const chain: string[] = [];
      for (let up: number | undefined = id, k = 0; up !== undefined && k <= depth; up = parent.get(up), k++)
        chain.push(label(nodes.get(up)!));
      const key = chain.join('\n      <- ');
      byStack.set(key, (byStack.get(key) ?? 0) + dt);
    }
  }
  return [
    `${total.toFixed(0)} ms in functions matching ${pattern}`,
    ...[...byStack]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, v]) => `${v.toFixed(0).padStart(7)} ms  ${k}`),
  ].join('\n');
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      top: { type: 'string', default: '25' },
      /** A regular expression: print who calls the functions it matches instead of the summary. */
      callers: { type: 'string' },
      depth: { type: 'string', default: '4' },
      until: { type: 'string' },
    },
  });
  const files = positionals.flatMap((p) =>
    statSync(p).isDirectory()
      ? readdirSync(p)
          .filter((f) => f.endsWith('.cpuprofile'))
          .map((f) => join(p, f))
      : [p],
  );
  const until = values.until === undefined ? undefined : Number(values.until);
  console.log(
    values.callers
      ? callers(files, new RegExp(values.callers), Number(values.depth), Number(values.top), until)
      : summarize(files, Number(values.top), until),
  );
}
