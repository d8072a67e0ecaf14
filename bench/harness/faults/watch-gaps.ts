/**
 * Measures what proves a watch alive on a healthy connection: the longest gap between two things a quiet
 * watch delivers (bookmarks; the server's close at timeoutSeconds), for a few timeouts, on a fresh control
 * plane with nothing changing. The runtime's silence deadline (cache/watcher.ts) must exceed these gaps.
 *
 *   node bench/harness/faults/watch-gaps.ts [seconds, default 130] [timeouts, default 25,30,35,300]
 */

import { start } from '@opkit/controlplane';
import { ConfigMaps, createClient, loadConfig } from '@opkit/runtime';

const seconds = Number(process.argv[2] ?? 130);
const timeouts = (process.argv[3] ?? '25,30,35,300').split(',').map(Number);
await using cp = await start({ mode: 'apiserver' });
const client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }));
const stop = AbortSignal.timeout(seconds * 1000);
const rows = await Promise.all(
  timeouts.map(async (timeoutSeconds) => {
    const list = await client.list(ConfigMaps, { namespace: 'default' });
    let rv = list.metadata?.resourceVersion ?? '';
    const gaps: number[] = [];
    const what: string[] = [];
    let last = performance.now();
    const mark = (kind: string) => {
      const now = performance.now();
      gaps.push((now - last) / 1000);
      what.push(`${kind}@${((now - last) / 1000).toFixed(1)}`);
      last = now;
    };
    while (!stop.aborted) {
      try {
        for await (const ev of client.watch(ConfigMaps, {
          namespace: 'default',
          resourceVersion: rv,
          allowWatchBookmarks: true,
          timeoutSeconds,
          signal: stop,
        })) {
          rv = ev.object.metadata?.resourceVersion ?? rv;
          mark(ev.type === 'BOOKMARK' ? 'bookmark' : ev.type);
        }
        if (!stop.aborted) mark('close');
      } catch (err) {
        if (!stop.aborted) mark(`error ${String(err).slice(0, 60)}`);
      }
    }
    return { timeoutSeconds, maxGap: Math.max(0, ...gaps), sequence: what.join(' ') };
  }),
);
for (const r of rows)
  console.log(`timeoutSeconds=${r.timeoutSeconds}: longest gap ${r.maxGap.toFixed(1)} s; ${r.sequence}`);
client.close();
