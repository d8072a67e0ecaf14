/**
 * The code of docs/runtime.md (and of packages/runtime/README.md): docs/examples/*.ts, run against the
 * FakeClient, and the quoted blocks kept identical to those files.
 *
 * The doc quotes a region of an example file like this:
 *
 *   <!-- include: examples/client.ts#crud -->
 *   ```ts
 *   ...the lines between `// #region crud` and `// #endregion crud`, dedented...
 *   ```
 *
 * After changing an example, refresh the doc's blocks with
 *   OPKIT_UPDATE_DOCS=1 npx node scripts/test.ts packages/runtime/test/unit/example-docs.test.ts
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, test } from 'node:test';
import {
  ConfigMaps,
  Deployments,
  EventRecorder,
  Events,
  isTerminalError,
  type Pod,
  Pods,
  passesUpdate,
  type ReconcileContext,
  Secrets,
  silentLogger,
} from '@opkit/runtime';
import { FakeClient, FakePodExecutor } from '@opkit/runtime/testing';
import { podCache, readFromCache, watchConfigMaps } from '../../../../docs/examples/cache.ts';
import { crud, firstEvents, getOrExplain, patches } from '../../../../docs/examples/client.ts';
import { ttlReconciler } from '../../../../docs/examples/controller.ts';
import { promote, promoteOnFake } from '../../../../docs/examples/exec.ts';
import { markReady, reconcileAnnouncement, writeChildren } from '../../../../docs/examples/helpers.ts';
import { reporter } from '../../../../docs/examples/manager.ts';
import { greetingsUsing, interesting, onlyDeletes } from '../../../../docs/examples/predicates.ts';
import { fill, limiter, newQueue, worker } from '../../../../docs/examples/queue.ts';
import { type Greeting, Greetings } from '../../../../docs/examples/quickstart.ts';
import { check, type Database, Databases, example } from '../../../../docs/examples/schema.ts';
// The testing chapter's examples are node:test tests themselves: importing them runs them here.
import '../../../../docs/examples/testing.ts';

const DOCS = join(import.meta.dirname, '../../../../docs');
/** The Markdown files that quote examples; include paths are relative to docs/ in both. */
const QUOTING = [join(DOCS, 'runtime.md'), join(import.meta.dirname, '../../README.md')];

// --- the doc's quoted blocks ---

const INCLUDE = /<!-- include: ([\w./-]+)#([\w-]+) -->\n```ts\n([\s\S]*?)```\n/g;

/** The lines between `// #region name` and `// #endregion name`, without their common indentation. */
function region(file: string, name: string): string {
  const lines = readFileSync(join(DOCS, file), 'utf8').split('\n');
  const start = lines.findIndex((l) => l.trim() === `// #region ${name}`);
  const end = lines.findIndex((l, i) => i > start && l.trim() === `// #endregion ${name}`);
  assert.ok(start >= 0 && end > start, `${file} has a region "${name}"`);
  const body = lines.slice(start + 1, end);
  const indent = Math.min(...body.filter((l) => l.trim()).map((l) => l.length - l.trimStart().length));
  return `${body.map((l) => l.slice(indent)).join('\n')}\n`;
}

describe('docs/runtime.md and packages/runtime/README.md', () => {
  for (const path of QUOTING) {
    test(`every quoted block of ${basename(path)} is the current text of its example region`, () => {
      const doc = readFileSync(path, 'utf8');
      const includes = [...doc.matchAll(INCLUDE)];
      assert.ok(includes.length > 0, 'the file quotes examples');
      assert.equal(includes.length, doc.match(/<!-- include: /g)?.length, 'each marker precedes a ts block');
      if (process.env.OPKIT_UPDATE_DOCS) {
        const updated = doc.replace(
          INCLUDE,
          (_m, file: string, name: string) =>
            `<!-- include: ${file}#${name} -->\n\`\`\`ts\n${region(file, name)}\`\`\`\n`,
        );
        if (updated !== doc) writeFileSync(path, updated);
        return;
      }
      for (const [, file, name, body] of includes) {
        assert.equal(body, region(file!, name!), `${basename(path)}: block ${file}#${name} is out of date`);
      }
    });
  }
});

// --- the examples, run ---

function ctx(): ReconcileContext {
  return {
    signal: new AbortController().signal,
    log: silentLogger(),
    reconcileID: 'test',
    controller: 'docs',
  };
}

describe('docs/examples', () => {
  test('client: crud, patches, errors and a raw watch', async () => {
    const fake = new FakeClient();
    const items = await crud(fake);
    assert.deepEqual(
      items.map((cm) => cm.data),
      [{ color: 'blue', size: 'large' }],
    );
    assert.equal(
      fake.getStored(ConfigMaps, { namespace: 'default', name: 'settings' }),
      undefined,
      'deleted',
    );
    assert.deepEqual((await patches(fake)).data, { a: '3', b: '2' });
    assert.equal(await getOrExplain(fake, 'missing'), undefined);

    const events = firstEvents(fake, 2);
    await new Promise((r) => setTimeout(r, 20));
    await fake.create(ConfigMaps, { metadata: { namespace: 'default', name: 'one' } });
    await fake.delete(ConfigMaps, { namespace: 'default', name: 'one' });
    assert.deepEqual(await events, ['ADDED one', 'DELETED one']);
  });

  test('exec: promote through the fake executor; a pod that is not running is retried later', async () => {
    assert.deepEqual(await promoteOnFake(), {
      promoted: true,
      commands: [['pg_ctl', 'promote', '-D', '/var/lib/postgresql/data']],
    });
    const pending: Pod = {
      metadata: { namespace: 'db', name: 'pg-2' },
      spec: { containers: [{ name: 'postgres', image: 'postgres:15' }] },
    };
    const client = new FakeClient({ objects: [{ resource: Pods, object: pending }] });
    const exec = new FakePodExecutor({ client }).on({}, { stdout: 'server promoting\n' });
    assert.equal(await promote(exec, 'db', 'pg-2'), undefined, 'no node yet: not run');
    await assert.rejects(promote(exec, 'db', 'missing'), { name: 'NotFoundError' });
  });

  test('cache: a shared informer and the Cache with an index', async () => {
    const pod = (name: string, node: string, app = 'web'): Pod => ({
      metadata: { namespace: 'default', name, labels: { app } },
      spec: { nodeName: node, containers: [{ name: 'c', image: 'i' }] },
    });
    const fake = new FakeClient({
      objects: [
        {
          resource: ConfigMaps,
          object: { metadata: { namespace: 'default', name: 'a', labels: { app: 'demo' } } },
        },
        { resource: ConfigMaps, object: { metadata: { namespace: 'default', name: 'b' } } },
        { resource: Pods, object: pod('web-0', 'node-1') },
        { resource: Pods, object: pod('db-0', 'node-1', 'db') },
      ],
    });
    const stop = new AbortController();
    try {
      assert.deepEqual(await watchConfigMaps(fake, stop.signal), ['default/a']);
      const copy = await readFromCache(podCache(fake), stop.signal);
      assert.equal(copy?.metadata.labels?.seen, 'true', 'a mutable copy');
    } finally {
      stop.abort();
    }
  });

  test('predicates and handlers', () => {
    const greeting = (generation: number, labels: Record<string, string> = {}) =>
      Greetings.build({
        metadata: { name: 'g', namespace: 'default', generation, labels },
        spec: { message: 'm' },
      });
    assert.equal(passesUpdate([interesting], greeting(1), greeting(2)), true, 'spec changed');
    assert.equal(passesUpdate([interesting], greeting(1), greeting(1)), false, 'status only');
    assert.equal(passesUpdate([interesting], greeting(1), greeting(1, { a: 'b' })), true, 'labels changed');
    const paused = greeting(2, { 'demo.opkit.dev/paused': 'true' });
    assert.equal(passesUpdate([interesting], greeting(1), paused), false, 'paused');
    assert.equal(onlyDeletes.delete, undefined, 'deletes pass');
    const secret = {
      metadata: { namespace: 'ns', name: 's', annotations: { 'demo.opkit.dev/greeting': 'g' } },
    };
    assert.deepEqual(greetingsUsing(secret), [{ namespace: 'ns', name: 'g' }]);
    assert.equal(Secrets.kind, 'Secret');
  });

  test('queue: dedup, delayed adds, backoff on failure', async () => {
    const queue = newQueue();
    fill(queue);
    const seen: string[] = [];
    const stop = new AbortController();
    const run = worker(
      queue,
      async (key) => {
        seen.push(key);
        if (key === 'default/b' && seen.filter((k) => k === key).length === 1) throw new Error('transient');
      },
      stop.signal,
    );
    for (let i = 0; i < 100 && seen.length < 4; i++) await new Promise((r) => setTimeout(r, 10));
    stop.abort();
    await run;
    assert.deepEqual(seen.slice(0, 2), ['default/a', 'default/b'], 'a once, in order');
    assert.deepEqual(
      seen.slice(2).sort(),
      ['default/b', 'default/c'],
      'b retried after its backoff, c later',
    );
    assert.equal(limiter.when('x'), 5);
  });

  test('controller: results and TerminalError', async () => {
    const fake = new FakeClient();
    const reconcile = ttlReconciler(fake);
    const req = { namespace: 'default', name: 'c' };
    assert.equal(await reconcile(req, ctx()), undefined, 'gone: done');
    await fake.create(ConfigMaps, { metadata: { ...req, annotations: { 'example.com/ttl-seconds': '30' } } });
    assert.deepEqual(await reconcile(req, ctx()), { requeueAfter: 30_000 });
    const cm = fake.getStored(ConfigMaps, req)!;
    cm.metadata.annotations = { 'example.com/ttl-seconds': 'soon' };
    await fake.update(ConfigMaps, cm);
    await assert.rejects(reconcile(req, ctx()), (err: unknown) => isTerminalError(err));
  });

  test('helpers: finalizer with cleanup, status conditions, createOrUpdate with mutate, apply', async () => {
    const fake = new FakeClient({ statusSubresource: [Greetings.resource] });
    const events = new EventRecorder({
      client: fake,
      reportingController: 'docs',
      reportingInstance: 'test',
    });
    let greeting = await fake.create(
      Greetings.resource,
      Greetings.build({ metadata: { namespace: 'default', name: 'g' }, spec: { message: 'hello' } }),
    );
    const announcement = { namespace: 'announcements', name: 'default.g' };
    await reconcileAnnouncement(fake, greeting, events);
    greeting = fake.getStored(Greetings.resource, { namespace: 'default', name: 'g' })!;
    assert.deepEqual(greeting.metadata.finalizers, ['demo.opkit.dev/announcement']);
    await reconcileAnnouncement(fake, greeting, events);
    assert.deepEqual(fake.getStored(ConfigMaps, announcement)?.data, { message: 'hello' });

    const first = await markReady(fake, greeting, true, 'up');
    assert.equal(first.changed, true);
    greeting = fake.getStored(Greetings.resource, { namespace: 'default', name: 'g' })!;
    assert.deepEqual(await markReady(fake, greeting, true, 'up'), { changed: false, ready: true });

    await fake.delete(Greetings.resource, { namespace: 'default', name: 'g' });
    const deleting = fake.getStored(Greetings.resource, { namespace: 'default', name: 'g' }) as Greeting;
    await reconcileAnnouncement(fake, deleting, events);
    assert.equal(fake.getStored(ConfigMaps, announcement), undefined, 'cleaned up');
    assert.equal(fake.getStored(Greetings.resource, { namespace: 'default', name: 'g' }), undefined, 'gone');
    await events.close();
    assert.deepEqual(
      fake.objects(Events).map((e) => e.reason),
      ['Announced', 'AnnouncementRemoved'],
    );

    const reader = { get: () => undefined };
    const applied = await writeChildren(fake, reader);
    assert.equal(applied.operation, 'created');
    const web = fake.getStored(Deployments, { namespace: 'demo', name: 'web' })!;
    web.spec!.replicas = 7; // an autoscaler
    await fake.update(Deployments, web);
    await writeChildren(fake, { get: (res, key) => fake.getStored(res, key) });
    assert.equal(fake.getStored(Deployments, { namespace: 'demo', name: 'web' })?.spec?.replicas, 7, 'kept');
  });

  test('manager: a leader-only runnable stops when its signal aborts', async () => {
    const stop = new AbortController();
    const running = reporter.start(stop.signal);
    stop.abort();
    await running;
    assert.equal(reporter.needLeaderElection, true);
  });

  test('schema: type, defaults, validation, CRD', () => {
    assert.deepEqual(check(example), []);
    const bad = { ...example, spec: { ...example.spec, engine: 'oracle' } } as unknown as Database;
    assert.match(check(bad).join('\n'), /^spec\.engine: Unsupported value/m);
    const crd = Databases.crd();
    assert.equal(crd.metadata.name, 'databases.example.com');
    assert.deepEqual(crd.spec.versions[0]?.subresources?.status, {});
    assert.equal(Databases.applyDefaults(example).spec.replicas, 1);
  });
});
