/**
 * The API server's own request counters: apiserver_request_total{verb,resource,subresource,...} from
 * /metrics. The operator's requests in a window are after - before - the harness's own requests.
 */
import { localGet } from './impls.ts';
import { addCount, type Kube, type RequestCounts } from './kube.ts';

export const WRITE_VERBS = ['POST', 'PUT', 'PATCH', 'APPLY', 'DELETE', 'DELETECOLLECTION'];
export const READ_VERBS = ['GET', 'LIST'];

function parseLabels(s: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of s.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) out[m[1]!] = m[2]!;
  return out;
}

export async function scrapeRequestCounts(kube: Kube): Promise<RequestCounts> {
  const res = await kube.raw('GET', '/metrics', undefined, undefined, 'text/plain');
  if (res.code !== 200) throw new Error(`GET /metrics: HTTP ${res.code}`);
  const counts: RequestCounts = new Map();
  for (const line of res.text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const close = line.lastIndexOf('}');
    const labels = parseLabels(line.slice('apiserver_request_total{'.length, close));
    const value = Number(line.slice(close + 1).trim());
    if (!labels.resource) continue;
    const res = labels.subresource ? `${labels.resource}/${labels.subresource}` : labels.resource;
    addCount(counts, labels.verb ?? '?', res, value);
  }
  return counts;
}

/** a - b - c, per verb and resource; zero entries dropped. */
export function diffCounts(a: RequestCounts, b: RequestCounts, c?: RequestCounts): RequestCounts {
  const out: RequestCounts = new Map();
  for (const [verb, byRes] of a) {
    for (const [res, n] of byRes) {
      const d = n - (b.get(verb)?.get(res) ?? 0) - (c?.get(verb)?.get(res) ?? 0);
      if (d !== 0) addCount(out, verb, res, d);
    }
  }
  return out;
}

/**
 * Resources the benchmark is about; other requests are ignored: the API server's own loops (its identity
 * Lease renewals, bootstrap) land in the same counters. No implementation uses leader election here.
 */
export const BENCH_RESOURCES = new Set([
  'databases',
  'databases/status',
  'secrets',
  'configmaps',
  'services',
  'statefulsets',
  'poddisruptionbudgets',
  'events',
  'persistentvolumeclaims',
  'pods',
]);

export function summarize(counts: RequestCounts): {
  byVerb: Record<string, number>;
  writes: number;
  reads: number;
  detail: Record<string, Record<string, number>>;
} {
  const byVerb: Record<string, number> = {};
  const detail: Record<string, Record<string, number>> = {};
  let writes = 0;
  let reads = 0;
  for (const [verb, byRes] of counts) {
    for (const [res, n] of byRes) {
      if (!BENCH_RESOURCES.has(res)) continue;
      byVerb[verb] = (byVerb[verb] ?? 0) + n;
      detail[verb] ??= {};
      detail[verb][res] = n;
      if (WRITE_VERBS.includes(verb)) writes += n;
      if (READ_VERBS.includes(verb)) reads += n;
    }
  }
  return { byVerb, writes, reads, detail };
}

/**
 * Reconciles an operator has run (controller_runtime_reconcile_total summed over controllers and
 * results, from its own /metrics; opkit and controller-runtime both serve it). undefined when the
 * operator serves no such metric (the client-node peer).
 */
export async function scrapeReconciles(metricsPort: number): Promise<number | undefined> {
  const { code, text } = await localGet(metricsPort, '/metrics');
  if (code !== 200) return undefined;
  let total: number | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith('controller_runtime_reconcile_total{')) continue;
    total = (total ?? 0) + Number(line.slice(line.lastIndexOf('}') + 1).trim());
  }
  return total;
}

/**
 * The operator's heap in use from its own /metrics: Node's `nodejs_heap_size_used_bytes` (prom-client) or
 * Go's `go_memstats_heap_alloc_bytes` (client_golang). Undefined when it serves neither.
 */
export async function scrapeHeapBytes(metricsPort: number): Promise<number | undefined> {
  const { code, text } = await localGet(metricsPort, '/metrics');
  if (code !== 200) return undefined;
  for (const line of text.split('\n')) {
    if (line.startsWith('nodejs_heap_size_used_bytes ') || line.startsWith('go_memstats_heap_alloc_bytes ')) {
      return Number(line.slice(line.indexOf(' ') + 1).trim());
    }
  }
  return undefined;
}

/** Node's own view of its memory from an opkit /metrics (prom-client's defaults), in bytes. */
export interface NodeHeap {
  total: number;
  used: number;
  external: number;
  /** V8's heap spaces with memory committed, by name ("new", "old", "code", ...). */
  spaces: [string, number][];
}

/**
 * V8's heap, by space, and the memory outside it that V8 accounts for (`nodejs_heap_size_*`,
 * `nodejs_heap_space_size_total_bytes`, `nodejs_external_memory_bytes`): what of a Node process's
 * anonymous memory is V8's. Undefined when the operator serves no such metrics (the Go peer).
 */
export async function scrapeNodeHeap(metricsPort: number): Promise<NodeHeap | undefined> {
  const { code, text } = await localGet(metricsPort, '/metrics');
  if (code !== 200) return undefined;
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  const total = value('nodejs_heap_size_total_bytes');
  if (Number.isNaN(total)) return undefined;
  const spaces = [...text.matchAll(/^nodejs_heap_space_size_total_bytes\{space="(\w+)"\} (\S+)/gm)]
    .map((m): [string, number] => [m[1] ?? '', Number(m[2])])
    .filter(([, bytes]) => bytes > 0);
  return {
    total,
    used: value('nodejs_heap_size_used_bytes'),
    external: value('nodejs_external_memory_bytes'),
    spaces,
  };
}
