/**
 * How informer errors are logged: an API server restart (ECONNRESET, connection refused) and a 410 relist are
 * recovery, one info line each without a stack; the stack only at debug. Errors someone must act on are
 * warnings. Driven through a real reflector (and the manager's cache) over a scripted client.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type ConfigMap, ConfigMaps } from '../../src/api/builtin.ts';
import { Reflector } from '../../src/cache/reflector.ts';
import { ShortWatchError, WatchSilenceError } from '../../src/cache/watcher.ts';
import {
  ConnectionError,
  DeadConnectionError,
  ForbiddenError,
  GoneError,
  ServerError,
} from '../../src/client/errors.ts';
import { createLogger } from '../../src/log/index.ts';
import { informerLogLine, logInformerError } from '../../src/log/informer-errors.ts';
import { createManager } from '../../src/manager/create.ts';
import { ScriptedClient } from '../../src/testing/index.ts';

const cm = (name: string, rv: string): ConfigMap => ({
  metadata: { namespace: 'ns', name, resourceVersion: rv },
});

function capture(level: 'info' | 'debug') {
  const lines: Record<string, unknown>[] = [];
  const destination = { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) };
  return { lines, logger: createLogger({ level, name: 'test', destination }) };
}

const reset = (code: string) =>
  new ConnectionError(
    `GET /api/v1/configmaps?watch=1 to 127.0.0.1:6443 failed: ${code}`,
    Object.assign(new Error(code), { code }),
  );

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * An API server restart as a client sees it: the open watch breaks (ECONNRESET), the next one is refused,
 * then the server is back but the resourceVersion was compacted (410): one relist, then a quiet watch.
 */
async function restartScript(client: ScriptedClient): Promise<void> {
  client.queueList(ConfigMaps, { items: [cm('a', '5')], resourceVersion: '10' });
  const first = await client.nextWatch(10_000);
  first.push({ type: 'ADDED', object: cm('b', '11') }).fail(reset('ECONNRESET'));
  (await client.nextWatch(10_000)).fail(reset('ECONNREFUSED'));
  (await client.nextWatch(10_000)).fail(new GoneError({ kind: 'Status', code: 410, reason: 'Expired' }, 410));
  client.queueList(ConfigMaps, { items: [cm('a', '5'), cm('b', '11')], resourceVersion: '30' });
  await client.nextWatch(10_000);
}

const backoff = { initialMs: 1, maxMs: 2, jitter: 0 };
const hasStack = (line: Record<string, unknown>) => JSON.stringify(line).includes('    at ');

describe('informer error logging', () => {
  test('a reflector through an API server restart: 3 info lines (2 retries, 1 relist), no warning, no stack', {
    timeout: 30_000,
  }, async () => {
    for (const level of ['info', 'debug'] as const) {
      const { lines, logger } = capture(level);
      const client = new ScriptedClient();
      const r = new Reflector(client, ConfigMaps, {
        backoff,
        watchList: false, // restartScript scripts LIST answers
        onError: (err, ctx) => logInformerError(logger, err, { ...ctx, resource: 'core/v1/configmaps' }),
      });
      const ac = new AbortController();
      const run = r.run(ac.signal);
      await restartScript(client);
      ac.abort();
      await run;
      assert.deepEqual(r.store.keys().sort(), ['ns/a', 'ns/b']);
      const at = (l: string) => lines.filter((x) => x.level === l);
      assert.deepEqual(
        at('info').map((l) => [l.msg, l.error ?? l.resourceVersion]),
        [
          ['watch failed, retrying', 'GET /api/v1/configmaps?watch=1 to 127.0.0.1:6443 failed: ECONNRESET'],
          ['watch failed, retrying', 'GET /api/v1/configmaps?watch=1 to 127.0.0.1:6443 failed: ECONNREFUSED'],
          ['relisting: the watch resourceVersion is too old (410 Gone)', '11'],
        ],
      );
      assert.equal(at('warn').length + at('error').length, 0, JSON.stringify(lines));
      for (const l of at('info')) {
        assert.equal(hasStack(l), false, `a stack at info: ${JSON.stringify(l)}`);
        assert.equal(l.resource, 'core/v1/configmaps');
      }
      // At debug each of them comes with the error and its stack.
      if (level === 'debug') {
        assert.equal(at('debug').length, 3);
        for (const l of at('debug')) assert.ok(hasStack(l), JSON.stringify(l));
      } else assert.equal(at('debug').length, 0);
    }
  });

  test("the manager's cache logs the same restart the same way (it logged a warning with a stack each)", {
    timeout: 30_000,
  }, async () => {
    const { lines, logger } = capture('info');
    const client = new ScriptedClient();
    const mgr = await createManager({ client, logger, cache: { backoff, watchList: false } });
    mgr.cache.getInformer(ConfigMaps);
    const ac = new AbortController();
    const run = mgr.cache.start(ac.signal);
    await restartScript(client);
    await until(() => mgr.cache.hasSynced(), 'the cache to sync');
    ac.abort();
    await run;
    const informerLines = lines.filter((l) => l.resource === 'core/v1/configmaps');
    assert.deepEqual(
      informerLines.map((l) => `${l.level} ${l.msg}`),
      [
        'info watch failed, retrying',
        'info watch failed, retrying',
        'info relisting: the watch resourceVersion is too old (410 Gone)',
      ],
    );
    for (const l of informerLines) assert.equal(hasStack(l), false, JSON.stringify(l));
  });

  test('what needs someone to act is a warning: RBAC with a hint, a failing handler with its stack', () => {
    const forbidden = informerLogLine(
      new ForbiddenError({ kind: 'Status', code: 403, message: 'configmaps is forbidden' }, 403),
      { phase: 'list', action: 'backoff', delayMs: 800, resourceVersion: '', resource: 'core/v1/configmaps' },
    );
    assert.equal(forbidden.level, 'warn');
    assert.equal(forbidden.withStack, false);
    assert.match(String(forbidden.fields.hint), /RBAC/);
    const backoffCtx = { phase: 'watch', action: 'backoff', delayMs: 800, resourceVersion: '7' };
    for (const transient of [
      new ShortWatchError(),
      new ServerError({ kind: 'Status', code: 503, message: 'unavailable' }, 503),
    ]) {
      assert.equal(informerLogLine(transient, backoffCtx).level, 'info', transient.name);
    }
    const handler = informerLogLine(new Error('handler bug'), {
      phase: 'handler',
      event: 'add',
      key: 'ns/a',
    });
    assert.equal(handler.level, 'warn');
    assert.equal(handler.withStack, true);
    assert.ok(handler.fields.err instanceof Error);
  });

  test('a half-open: one warning for the silent watch with what the pool did; the watches it closed at debug', () => {
    const silent = new WatchSilenceError(40_000);
    silent.sweep = { idleClosed: 3, requests: 2, watches: 5, proveAliveMs: 2000 };
    const rewatch = { phase: 'watch', action: 'rewatch', resourceVersion: '7', resource: 'core/v1/pods' };
    const line = informerLogLine(silent, rewatch);
    assert.equal(line.level, 'warn');
    assert.match(line.msg, /presumed dead .*half-open.*closes those in use that deliver nothing within 2 s/);
    assert.deepEqual(line.fields, {
      resource: 'core/v1/pods',
      phase: 'watch',
      silentSeconds: 40,
      idleClosed: 3,
      watchesChecked: 5,
      requestsChecked: 2,
    });
    assert.equal(informerLogLine(new DeadConnectionError('closed with its pool'), rewatch).level, 'debug');
  });
});
