/**
 * finalizers, patchStatus, createOrUpdate and apply against a small in-memory client that records
 * every call and follows the API's rules for resourceVersion preconditions and JSON patch `test` ops.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConfigMap, Deployment } from '../../src/api/builtin.ts';
import { ConfigMaps, Deployments } from '../../src/api/builtin.ts';
import type { Condition, KubeObject, ObjectKey, ObjectList, WatchEvent } from '../../src/api/object.ts';
import { keyOf } from '../../src/api/object.ts';
import type { Resource } from '../../src/api/resource.ts';
import { defineResource, resourceId } from '../../src/api/resource.ts';
import { ConflictError, errorFromStatus, InvalidError, NotFoundError } from '../../src/client/errors.ts';
import type { Client, JsonPatchOperation, Patch, WriteOptions } from '../../src/client/types.ts';
import {
  addFinalizer,
  apply,
  createOrUpdate,
  hasFinalizer,
  isBeingDeleted,
  mergePatchOf,
  patchStatus,
  removeFinalizer,
  runFinalizer,
  setCondition,
  setControllerReference,
} from '../../src/helpers/index.ts';

interface Action {
  verb: string;
  resource: string;
  key: string;
  patch?: Patch;
  body?: unknown;
  opts?: WriteOptions;
}

type Json = Record<string, unknown>;

/** The body of a recorded patch. */
const bodyOf = (action: Action | undefined): unknown =>
  (action?.patch as { body?: unknown } | undefined)?.body;

const conflict = () =>
  errorFromStatus(409, {
    kind: 'Status',
    code: 409,
    reason: 'Conflict',
    message: 'the object has been modified',
  });
const notFound = (key: string) =>
  errorFromStatus(404, { kind: 'Status', code: 404, reason: 'NotFound', message: `${key} not found` });
const invalid = (message: string) =>
  errorFromStatus(422, { kind: 'Status', code: 422, reason: 'Invalid', message });

function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return structuredClone(patch);
  const out: Json =
    target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Json) } : {};
  for (const [k, v] of Object.entries(patch as Json)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function jsonPatch(doc: Json, ops: JsonPatchOperation[]): Json {
  const out = structuredClone(doc);
  for (const op of ops) {
    const parts = op.path.split('/').slice(1);
    const last = parts.pop()!;
    let parent: unknown = out;
    for (const p of parts) parent = (parent as Json)[p];
    const container = parent as Json & unknown[];
    if (op.op === 'test') {
      if (JSON.stringify(container?.[last as never]) !== JSON.stringify(op.value)) {
        throw invalid(`testing value ${op.path} failed`);
      }
    } else if (op.op === 'add' && Array.isArray(container)) {
      if (last === '-') container.push(op.value);
      else container.splice(Number(last), 0, op.value);
    } else if (op.op === 'add' || op.op === 'replace') {
      if (op.op === 'replace' && !(last in container)) throw invalid(`replace ${op.path}: missing`);
      container[last as never] = structuredClone(op.value) as never;
    } else if (op.op === 'remove') {
      if (Array.isArray(container)) container.splice(Number(last), 1);
      else delete container[last as never];
    }
  }
  return out;
}

class StubClient implements Client {
  readonly fieldManager = 'stub-manager';
  readonly actions: Action[] = [];
  /** Runs just before a write is applied: simulate another writer getting there first. */
  beforeWrite: ((verb: string) => void) | undefined;
  readonly #objects = new Map<string, KubeObject>();
  #rv = 100;
  #uid = 0;

  #id(res: Resource, key: ObjectKey): string {
    return `${resourceId(res)}:${keyOf(key)}`;
  }

  /** Stores an object directly (no action recorded), filling uid/resourceVersion/generation. */
  seed<T extends KubeObject>(res: Resource<T>, obj: T): T {
    const stored = structuredClone(obj);
    stored.metadata.uid ??= `uid-${++this.#uid}`;
    stored.metadata.resourceVersion = String(++this.#rv);
    stored.metadata.generation ??= 1;
    this.#objects.set(
      this.#id(res, { namespace: obj.metadata.namespace, name: obj.metadata.name ?? '' }),
      stored,
    );
    return structuredClone(stored);
  }

  peek<T extends KubeObject>(res: Resource<T>, key: ObjectKey): T | undefined {
    const obj = this.#objects.get(this.#id(res, key));
    return obj === undefined ? undefined : (structuredClone(obj) as T);
  }

  writes(): Action[] {
    return this.actions.filter((a) => a.verb !== 'get');
  }

  #store<T extends KubeObject>(res: Resource<T>, before: KubeObject | undefined, after: KubeObject): T {
    const obj = structuredClone(after);
    const changed =
      JSON.stringify({ ...before, metadata: undefined }) !== JSON.stringify({ ...obj, metadata: undefined });
    obj.metadata.resourceVersion = String(++this.#rv);
    if (before && changed) obj.metadata.generation = (before.metadata.generation ?? 1) + 1;
    const key = { namespace: obj.metadata.namespace, name: obj.metadata.name ?? '' };
    if (obj.metadata.deletionTimestamp && (obj.metadata.finalizers ?? []).length === 0) {
      this.#objects.delete(this.#id(res, key));
    } else {
      this.#objects.set(this.#id(res, key), obj);
    }
    return structuredClone(obj) as T;
  }

  #current(res: Resource, key: ObjectKey): KubeObject {
    const obj = this.#objects.get(this.#id(res, key));
    if (!obj) throw notFound(keyOf(key));
    return obj;
  }

  async get<T extends KubeObject>(res: Resource<T>, key: ObjectKey): Promise<T> {
    this.actions.push({ verb: 'get', resource: res.plural, key: keyOf(key) });
    return structuredClone(this.#current(res, key)) as T;
  }

  async list<T extends KubeObject>(): Promise<ObjectList<T>> {
    throw new Error('not implemented');
  }

  async create<T extends KubeObject>(res: Resource<T>, obj: T, opts?: WriteOptions): Promise<T> {
    this.actions.push({
      verb: 'create',
      resource: res.plural,
      key: keyOf(obj),
      body: structuredClone(obj),
      opts,
    });
    this.beforeWrite?.('create');
    if (this.#objects.has(this.#id(res, obj.metadata as ObjectKey))) {
      throw errorFromStatus(409, { kind: 'Status', code: 409, reason: 'AlreadyExists' });
    }
    const created = structuredClone(obj);
    created.metadata.uid = `uid-${++this.#uid}`;
    created.metadata.generation = 1;
    created.metadata.creationTimestamp = '2024-01-01T00:00:00Z';
    return this.#store(res, undefined, created);
  }

  async update<T extends KubeObject>(res: Resource<T>, obj: T, opts?: WriteOptions): Promise<T> {
    this.actions.push({
      verb: 'update',
      resource: res.plural,
      key: keyOf(obj),
      body: structuredClone(obj),
      opts,
    });
    this.beforeWrite?.('update');
    const current = this.#current(res, obj.metadata as ObjectKey);
    const rv = obj.metadata.resourceVersion;
    if (rv && rv !== current.metadata.resourceVersion) throw conflict();
    const next = { ...structuredClone(obj), status: (current as unknown as Json).status } as KubeObject;
    next.metadata = { ...next.metadata, uid: current.metadata.uid, generation: current.metadata.generation };
    return this.#store(res, current, next);
  }

  async patch<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts?: WriteOptions,
  ): Promise<T> {
    this.actions.push({
      verb: 'patch',
      resource: res.plural,
      key: keyOf(key),
      patch: structuredClone(patch),
      opts,
    });
    this.beforeWrite?.('patch');
    const id = this.#id(res, key);
    const current = this.#objects.get(id);
    if (patch.type === 'apply') {
      const merged = mergePatch(current ?? {}, patch.body) as KubeObject;
      if (!current) {
        merged.metadata.uid = `uid-${++this.#uid}`;
        merged.metadata.generation = 1;
      }
      return this.#store(res, current, merged);
    }
    if (!current) throw notFound(keyOf(key));
    let next: KubeObject;
    if (patch.type === 'json')
      next = jsonPatch(current as unknown as Json, patch.body) as unknown as KubeObject;
    else next = mergePatch(current, patch.body) as KubeObject;
    if (next.metadata.resourceVersion !== current.metadata.resourceVersion) throw conflict();
    return this.#store(res, current, next);
  }

  async delete<T extends KubeObject>(res: Resource<T>, key: ObjectKey): Promise<void> {
    this.actions.push({ verb: 'delete', resource: res.plural, key: keyOf(key) });
    const current = this.#current(res, key);
    if ((current.metadata.finalizers ?? []).length === 0) this.#objects.delete(this.#id(res, key));
    else
      this.#store(res, current, {
        ...current,
        metadata: { ...current.metadata, deletionTimestamp: '2024-01-02T00:00:00Z' },
      });
  }

  async updateStatus<T extends KubeObject>(): Promise<T> {
    throw new Error('not implemented');
  }

  async patchStatus<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts?: WriteOptions,
  ): Promise<T> {
    this.actions.push({
      verb: 'patchStatus',
      resource: res.plural,
      key: keyOf(key),
      patch: structuredClone(patch),
      opts,
    });
    this.beforeWrite?.('patchStatus');
    const current = this.#current(res, key);
    if (patch.type !== 'merge') throw new Error('stub: merge only');
    const body = patch.body as { status?: unknown; metadata?: { resourceVersion?: string } };
    const rv = body.metadata?.resourceVersion;
    if (rv && rv !== current.metadata.resourceVersion) throw conflict();
    const next = {
      ...structuredClone(current),
      status: mergePatch((current as unknown as Json).status, body.status),
    } as KubeObject;
    const stored = structuredClone(next);
    stored.metadata.resourceVersion = String(++this.#rv);
    this.#objects.set(this.#id(res, key), stored);
    return structuredClone(stored) as T;
  }

  // biome-ignore lint/correctness/useYield: not used by these tests
  async *watch<T extends KubeObject>(): AsyncIterable<WatchEvent<T>> {
    throw new Error('not implemented');
  }
}

const FINALIZER = 'opkit.dev/cleanup';
const key = { namespace: 'ns', name: 'cm' };
const cm = (extra: Partial<ConfigMap> = {}): ConfigMap => ({
  metadata: { name: 'cm', namespace: 'ns' },
  ...extra,
});

describe('finalizers', () => {
  it('hasFinalizer / isBeingDeleted', () => {
    assert.equal(hasFinalizer(cm(), FINALIZER), false);
    assert.equal(hasFinalizer({ metadata: { finalizers: ['a', FINALIZER] } }, FINALIZER), true);
    assert.equal(isBeingDeleted(cm()), false);
    assert.equal(isBeingDeleted({ metadata: { deletionTimestamp: '2024-01-01T00:00:00Z' } }), true);
  });

  it('addFinalizer patches with a resourceVersion test, and is a no-op when present', async () => {
    const client = new StubClient();
    const live = client.seed(ConfigMaps, cm());
    const written = await addFinalizer(client, ConfigMaps, live, FINALIZER);
    assert.deepEqual(written.metadata.finalizers, [FINALIZER]);
    assert.deepEqual(client.writes(), [
      {
        verb: 'patch',
        resource: 'configmaps',
        key: 'ns/cm',
        patch: {
          type: 'json',
          body: [
            { op: 'test', path: '/metadata/resourceVersion', value: live.metadata.resourceVersion },
            { op: 'add', path: '/metadata/finalizers', value: [FINALIZER] },
          ],
        },
        opts: {},
      },
    ]);
    const again = await addFinalizer(client, ConfigMaps, written, FINALIZER);
    assert.equal(again, written);
    assert.equal(client.writes().length, 1);
  });

  it('keeps finalizers other controllers added concurrently (retries after the test fails)', async () => {
    const client = new StubClient();
    const stale = client.seed(
      ConfigMaps,
      cm({ metadata: { name: 'cm', namespace: 'ns', finalizers: ['other/a'] } }),
    );
    let raced = false;
    client.beforeWrite = () => {
      if (raced) return;
      raced = true;
      const current = client.peek(ConfigMaps, key)!;
      current.metadata.finalizers = [...(current.metadata.finalizers ?? []), 'other/b'];
      client.seed(ConfigMaps, current);
    };
    const written = await addFinalizer(client, ConfigMaps, stale, FINALIZER);
    assert.deepEqual(written.metadata.finalizers, ['other/a', 'other/b', FINALIZER]);
    assert.deepEqual(
      client.actions.map((a) => a.verb),
      ['patch', 'get', 'patch'],
    );
  });

  it('retries ConflictError too, and gives up after the attempts', async () => {
    const client = new StubClient();
    const live = client.seed(ConfigMaps, cm());
    let conflicts = 1;
    client.beforeWrite = () => {
      if (conflicts-- > 0) throw conflict();
    };
    await addFinalizer(client, ConfigMaps, live, FINALIZER);
    assert.equal(client.writes().length, 2);

    const always = new StubClient();
    const obj = always.seed(ConfigMaps, cm());
    always.beforeWrite = () => {
      throw conflict();
    };
    await assert.rejects(addFinalizer(always, ConfigMaps, obj, FINALIZER, { attempts: 3 }), ConflictError);
    assert.equal(always.writes().length, 3);
  });

  it('does not retry a 422 that is not a failed resourceVersion test', async () => {
    const client = new StubClient();
    const live = client.seed(ConfigMaps, cm());
    client.beforeWrite = () => {
      throw invalid('metadata.finalizers: Invalid value');
    };
    await assert.rejects(addFinalizer(client, ConfigMaps, live, 'not a valid name'), InvalidError);
    assert.equal(client.writes().length, 1);
  });

  it('reads the object first when it has no resourceVersion', async () => {
    const client = new StubClient();
    client.seed(ConfigMaps, cm());
    await addFinalizer(client, ConfigMaps, cm(), FINALIZER);
    assert.deepEqual(
      client.actions.map((a) => a.verb),
      ['get', 'patch'],
    );
    await assert.rejects(addFinalizer(new StubClient(), ConfigMaps, cm(), FINALIZER), NotFoundError);
  });

  it('removeFinalizer keeps the others, is a no-op when absent, and undefined when the object is gone', async () => {
    const client = new StubClient();
    const live = client.seed(
      ConfigMaps,
      cm({ metadata: { name: 'cm', namespace: 'ns', finalizers: ['a', FINALIZER] } }),
    );
    const written = await removeFinalizer(client, ConfigMaps, live, FINALIZER);
    assert.deepEqual(written?.metadata.finalizers, ['a']);
    assert.deepEqual(bodyOf(client.writes()[0]), [
      { op: 'test', path: '/metadata/resourceVersion', value: live.metadata.resourceVersion },
      { op: 'replace', path: '/metadata/finalizers', value: ['a'] },
    ]);
    assert.equal(await removeFinalizer(client, ConfigMaps, written!, FINALIZER), written);
    assert.equal(client.writes().length, 1);
    const gone = { ...live, metadata: { ...live.metadata, name: 'gone' } };
    assert.equal(await removeFinalizer(client, ConfigMaps, gone, FINALIZER), undefined);
  });

  it('runFinalizer adds the finalizer to a live object', async () => {
    const client = new StubClient();
    const live = client.seed(ConfigMaps, cm());
    let cleanups = 0;
    const cleanup = async () => {
      cleanups++;
    };
    const outcome = await runFinalizer(client, ConfigMaps, live, FINALIZER, cleanup);
    assert.equal(outcome.added, true);
    assert.equal(outcome.deleted, false);
    assert.equal(outcome.finalized, false);
    assert.deepEqual(outcome.object?.metadata.finalizers, [FINALIZER]);
    const second = await runFinalizer(client, ConfigMaps, outcome.object!, FINALIZER, cleanup);
    assert.deepEqual(
      { deleted: second.deleted, finalized: second.finalized, added: second.added },
      { deleted: false, finalized: false, added: false },
    );
    assert.equal(cleanups, 0);
    assert.equal(client.writes().length, 1);
  });

  it('runFinalizer cleans up once and removes the finalizer when the object is being deleted', async () => {
    const client = new StubClient();
    client.seed(ConfigMaps, cm({ metadata: { name: 'cm', namespace: 'ns', finalizers: [FINALIZER] } }));
    await client.delete(ConfigMaps, key);
    const deleting = await client.get(ConfigMaps, key);
    assert.ok(deleting.metadata.deletionTimestamp);
    const seen: string[] = [];
    let raced = false;
    client.beforeWrite = (verb) => {
      if (verb !== 'patch' || raced) return;
      raced = true;
      client.seed(ConfigMaps, client.peek(ConfigMaps, key)!); // someone else bumps the resourceVersion
    };
    const outcome = await runFinalizer(client, ConfigMaps, deleting, FINALIZER, async (obj) => {
      seen.push(obj.metadata.name ?? '');
    });
    assert.deepEqual(seen, ['cm']);
    assert.deepEqual(
      { deleted: outcome.deleted, finalized: outcome.finalized, added: outcome.added },
      { deleted: true, finalized: true, added: false },
    );
    assert.equal(
      client.peek(ConfigMaps, key),
      undefined,
      'the last finalizer is gone, so the object is deleted',
    );

    const again = await runFinalizer(client, ConfigMaps, outcome.object ?? deleting, FINALIZER, async () => {
      seen.push('again');
    });
    assert.equal(again.finalized, false);
    assert.equal(again.deleted, true);
    assert.deepEqual(seen, ['cm']);
  });

  it('runFinalizer leaves the finalizer in place when cleanup fails', async () => {
    const client = new StubClient();
    client.seed(ConfigMaps, cm({ metadata: { name: 'cm', namespace: 'ns', finalizers: [FINALIZER] } }));
    await client.delete(ConfigMaps, key);
    const deleting = await client.get(ConfigMaps, key);
    await assert.rejects(
      runFinalizer(client, ConfigMaps, deleting, FINALIZER, async () => {
        throw new Error('backend unavailable');
      }),
      /backend unavailable/,
    );
    assert.deepEqual(client.peek(ConfigMaps, key)?.metadata.finalizers, [FINALIZER]);
  });

  it('runFinalizer on a deleting object without the finalizer does nothing', async () => {
    const client = new StubClient();
    const obj = cm({ metadata: { name: 'cm', namespace: 'ns', deletionTimestamp: '2024-01-01T00:00:00Z' } });
    const outcome = await runFinalizer(client, ConfigMaps, obj, FINALIZER, async () => {
      throw new Error('must not run');
    });
    assert.deepEqual(outcome, { deleted: true, finalized: false, added: false, object: obj });
    assert.equal(client.actions.length, 0);
  });
});

type Database = KubeObject & {
  spec?: { version?: string };
  status?: { phase?: string; observedGeneration?: number; conditions?: Condition[]; endpoint?: string };
};
const Databases = defineResource<Database>({
  group: 'opkit.dev',
  version: 'v1alpha1',
  kind: 'Database',
  plural: 'databases',
  namespaced: true,
});
const dbKey = { namespace: 'ns', name: 'db' };
const now = () => new Date('2024-05-01T10:00:00Z');

describe('patchStatus', () => {
  it('skips the write when the status is unchanged', async () => {
    const client = new StubClient();
    const db = client.seed(Databases, { metadata: { ...dbKey }, status: { phase: 'Ready' } });
    const result = await patchStatus(client, Databases, db, (s) => ({ ...s, phase: 'Ready' }));
    assert.deepEqual(result, { changed: false, object: db });
    const inPlace = await patchStatus(client, Databases, db, (s) => {
      s.phase = 'Ready';
      return s;
    });
    assert.equal(inPlace.changed, false);
    assert.equal(client.actions.length, 0);
    assert.equal(db.status?.phase, 'Ready');
  });

  it('sends a merge patch of what changed, conditions whole, removals as null', async () => {
    const client = new StubClient();
    const conditions = setCondition(
      [],
      { type: 'Ready', status: 'False', reason: 'Creating', message: '' },
      now,
    );
    const db = client.seed(Databases, {
      metadata: { ...dbKey },
      status: { phase: 'Creating', endpoint: 'old', conditions },
    });
    const result = await patchStatus(client, Databases, db, (s) => {
      const { endpoint: _gone, ...rest } = s;
      return {
        ...rest,
        phase: 'Ready',
        conditions: setCondition(
          s.conditions,
          { type: 'Ready', status: 'True', reason: 'Up', message: '' },
          now,
        ),
      };
    });
    assert.equal(result.changed, true);
    assert.equal(result.object.status?.phase, 'Ready');
    assert.equal(result.object.status?.endpoint, undefined);
    const [action] = client.writes();
    assert.equal(action?.verb, 'patchStatus');
    assert.deepEqual(action?.patch, {
      type: 'merge',
      body: {
        status: {
          endpoint: null,
          phase: 'Ready',
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'Up',
              message: '',
              lastTransitionTime: '2024-05-01T10:00:00Z',
            },
          ],
        },
      },
    });
    assert.equal(db.status?.phase, 'Creating', 'the input object is not modified');
  });

  it('sets observedGeneration from metadata.generation', async () => {
    const client = new StubClient();
    const db = client.seed(Databases, { metadata: { ...dbKey, generation: 4 }, status: { phase: 'Ready' } });
    const result = await patchStatus(client, Databases, db, (s) => s, { observedGeneration: true });
    assert.equal(result.changed, true);
    assert.deepEqual(bodyOf(client.writes()[0]), {
      status: { observedGeneration: 4 },
    });
    const again = await patchStatus(client, Databases, result.object, (s) => s, { observedGeneration: true });
    assert.equal(again.changed, false);
  });

  it('writes a first status onto an object without one, and can lock on resourceVersion', async () => {
    const client = new StubClient();
    const db = client.seed(Databases, { metadata: { ...dbKey } });
    assert.equal((await patchStatus(client, Databases, db, (s) => s)).changed, false);
    const result = await patchStatus(client, Databases, db, (s) => ({ ...s, phase: 'Pending' }), {
      optimisticLock: true,
    });
    assert.deepEqual(bodyOf(client.writes()[0]), {
      status: { phase: 'Pending' },
      metadata: { resourceVersion: db.metadata.resourceVersion },
    });
    await assert.rejects(
      patchStatus(client, Databases, db, (s) => ({ ...s, phase: 'Ready' }), { optimisticLock: true }),
      ConflictError,
    );
    assert.equal(result.object.status?.phase, 'Pending');
  });

  it('mergePatchOf', () => {
    assert.deepEqual(
      mergePatchOf({ a: 1, b: { c: 1, d: 2 }, e: [1] }, { a: 1, b: { c: 2, d: 2 }, e: [1, 2] }),
      {
        b: { c: 2 },
        e: [1, 2],
      },
    );
    assert.deepEqual(mergePatchOf({ a: 1 }, {}), { a: null });
    assert.deepEqual(mergePatchOf(undefined, { a: 1 }), { a: 1 });
  });
});

const deployment = (replicas = 2, image = 'postgres:16'): Deployment => ({
  metadata: { name: 'db', namespace: 'ns', labels: { app: 'db' } },
  spec: {
    replicas,
    selector: { matchLabels: { app: 'db' } },
    template: {
      metadata: { labels: { app: 'db' } },
      spec: { containers: [{ name: 'pg', image }] },
    },
  },
});

/** What the API server would add: defaults, status, extra labels. */
function serverDefaults(client: StubClient): void {
  const live = client.peek(Deployments, dbKey)!;
  live.metadata.labels = { ...live.metadata.labels, 'added-by': 'someone-else' };
  live.metadata.managedFields = [{ manager: 'kubectl', operation: 'Update' }];
  const spec = live.spec!;
  spec.strategy = { type: 'RollingUpdate' };
  spec.revisionHistoryLimit = 10;
  const container = spec.template.spec!.containers[0]!;
  container.terminationMessagePath = '/dev/termination-log';
  container.imagePullPolicy = 'IfNotPresent';
  live.status = { replicas: 2, readyReplicas: 2 };
  client.seed(Deployments, live);
}

describe('createOrUpdate', () => {
  it('creates a missing object', async () => {
    const client = new StubClient();
    const result = await createOrUpdate(client, Deployments, deployment());
    assert.equal(result.operation, 'created');
    assert.deepEqual(
      client.actions.map((a) => a.verb),
      ['get', 'create'],
    );
    const created = client.writes()[0]?.body as Deployment;
    assert.equal(created.apiVersion, 'apps/v1');
    assert.equal(created.kind, 'Deployment');
    assert.ok(result.object.metadata.uid);
  });

  it('makes no write when the live object already matches desired (server defaults ignored)', async () => {
    const client = new StubClient();
    await createOrUpdate(client, Deployments, deployment());
    serverDefaults(client);
    client.actions.length = 0;
    const result = await createOrUpdate(client, Deployments, deployment());
    assert.equal(result.operation, 'unchanged');
    assert.deepEqual(
      client.actions.map((a) => a.verb),
      ['get'],
    );
    assert.equal(result.object.spec?.revisionHistoryLimit, 10);
  });

  it('updates with the live resourceVersion, keeping fields desired does not mention', async () => {
    const client = new StubClient();
    await createOrUpdate(client, Deployments, deployment());
    serverDefaults(client);
    const live = client.peek(Deployments, dbKey)!;
    client.actions.length = 0;
    const result = await createOrUpdate(client, Deployments, deployment(3, 'postgres:17'));
    assert.equal(result.operation, 'updated');
    const [update] = client.writes();
    assert.equal(update?.verb, 'update');
    const sent = update?.body as Deployment;
    assert.equal(sent.metadata.resourceVersion, live.metadata.resourceVersion);
    assert.equal(sent.spec?.replicas, 3);
    assert.equal(sent.spec?.revisionHistoryLimit, 10);
    assert.deepEqual(sent.metadata.labels, { app: 'db', 'added-by': 'someone-else' });
    // The containers list is owned by desired: replaced whole.
    assert.deepEqual(sent.spec?.template.spec?.containers, [{ name: 'pg', image: 'postgres:17' }]);
    assert.equal(result.object.spec?.replicas, 3);
  });

  it('ignores status and server metadata in desired', async () => {
    const client = new StubClient();
    const created = await createOrUpdate(client, ConfigMaps, cm({ data: { a: '1' } }));
    client.actions.length = 0;
    const desired = {
      ...cm({ data: { a: '1' } }),
      status: { whatever: true },
      metadata: { ...key, uid: 'other', resourceVersion: '1', generation: 9, creationTimestamp: 'x' },
    } as ConfigMap;
    const result = await createOrUpdate(client, ConfigMaps, desired);
    assert.equal(result.operation, 'unchanged');
    assert.equal(result.object.metadata.uid, created.object.metadata.uid);
  });

  it('creates without the server-owned metadata of desired', async () => {
    const client = new StubClient();
    const desired = cm({ metadata: { ...key, uid: 'stale', resourceVersion: '5', labels: { a: 'b' } } });
    await createOrUpdate(client, ConfigMaps, desired);
    assert.deepEqual((client.writes()[0]?.body as ConfigMap | undefined)?.metadata, {
      ...key,
      labels: { a: 'b' },
    });
    assert.equal(desired.metadata.resourceVersion, '5', 'desired is not modified');
  });

  it('reads from opts.reader, and re-reads from the client after a conflict', async () => {
    const client = new StubClient();
    const first = client.seed(ConfigMaps, cm({ data: { a: '1' } }));
    client.seed(ConfigMaps, cm({ data: { a: '2' } })); // the cache is now behind
    const reads: string[] = [];
    const reader = {
      get: (_res: Resource, k: ObjectKey) => {
        reads.push(keyOf(k));
        return Object.freeze(first);
      },
    };
    const result = await createOrUpdate(client, ConfigMaps, cm({ data: { a: '3' } }), { reader });
    assert.equal(result.operation, 'updated');
    assert.deepEqual(reads, ['ns/cm']);
    assert.deepEqual(
      client.actions.map((a) => a.verb),
      ['update', 'get', 'update'],
    );
    assert.deepEqual(client.peek(ConfigMaps, key)?.data, { a: '3' });
  });

  it('an unchanged object read from the reader costs no API call at all', async () => {
    const client = new StubClient();
    const live = client.seed(ConfigMaps, cm({ data: { a: '1' } }));
    const reader = { get: async () => live };
    const result = await createOrUpdate(client, ConfigMaps, cm({ data: { a: '1' } }), { reader });
    assert.equal(result.operation, 'unchanged');
    assert.equal(client.actions.length, 0);
    const missing = { get: () => undefined };
    const created = await createOrUpdate(
      client,
      ConfigMaps,
      cm({ metadata: { name: 'new', namespace: 'ns' } }),
      {
        reader: missing,
      },
    );
    assert.equal(created.operation, 'created');
  });

  it('falls back to update when the cache said missing but the object exists', async () => {
    const client = new StubClient();
    client.seed(ConfigMaps, cm({ data: { a: '1' } }));
    const result = await createOrUpdate(client, ConfigMaps, cm({ data: { a: '2' } }), {
      reader: { get: () => undefined },
    });
    assert.equal(result.operation, 'updated');
    assert.deepEqual(
      client.actions.map((a) => a.verb),
      ['create', 'get', 'update'],
    );
  });

  it('uses mutate for the update and compares its result with the live object', async () => {
    const client = new StubClient();
    await createOrUpdate(client, Deployments, deployment(2));
    const live = client.peek(Deployments, dbKey)!;
    live.spec!.replicas = 5; // an autoscaler changed it
    client.seed(Deployments, live);
    client.actions.length = 0;
    const keepReplicas = (existing: Deployment, desired: Deployment): Deployment => ({
      ...existing,
      metadata: { ...existing.metadata, labels: { ...existing.metadata.labels, ...desired.metadata.labels } },
      spec: { ...existing.spec!, template: desired.spec!.template, replicas: existing.spec?.replicas },
    });
    const unchanged = await createOrUpdate(client, Deployments, deployment(2), { mutate: keepReplicas });
    assert.equal(unchanged.operation, 'unchanged');
    assert.equal(client.writes().length, 0);
    const updated = await createOrUpdate(client, Deployments, deployment(2, 'postgres:17'), {
      mutate: keepReplicas,
    });
    assert.equal(updated.operation, 'updated');
    assert.equal(updated.object.spec?.replicas, 5);
    assert.equal(updated.object.spec?.template.spec?.containers[0]?.image, 'postgres:17');
  });

  it('works with owner references set on desired', async () => {
    const client = new StubClient();
    const owner = client.seed(Databases, { metadata: { ...dbKey } });
    const desired = setControllerReference(owner, cm({ data: { a: '1' } }), Databases);
    assert.equal((await createOrUpdate(client, ConfigMaps, desired)).operation, 'created');
    const again = setControllerReference(owner, cm({ data: { a: '1' } }), Databases);
    assert.equal((await createOrUpdate(client, ConfigMaps, again)).operation, 'unchanged');
  });

  it('gives up on persistent conflicts', async () => {
    const client = new StubClient();
    client.seed(ConfigMaps, cm({ data: { a: '1' } }));
    client.beforeWrite = () => {
      throw conflict();
    };
    await assert.rejects(createOrUpdate(client, ConfigMaps, cm({ data: { a: '2' } })), ConflictError);
    assert.equal(client.writes().length, 3);
  });
});

describe('apply', () => {
  it('applies with the field manager and force, then skips when live matches', async () => {
    const client = new StubClient();
    const first = await apply(client, ConfigMaps, cm({ data: { a: '1' } }), {
      fieldManager: 'db-operator',
      force: true,
    });
    assert.equal(first.operation, 'created');
    const [action] = client.writes();
    assert.deepEqual(action?.patch, {
      type: 'apply',
      force: true,
      body: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'cm', namespace: 'ns' },
        data: { a: '1' },
      },
    });
    assert.equal(action?.opts?.fieldManager, 'db-operator');

    client.actions.length = 0;
    const second = await apply(client, ConfigMaps, cm({ data: { a: '1' } }), { fieldManager: 'db-operator' });
    assert.equal(second.operation, 'unchanged');
    assert.equal(client.writes().length, 0);

    const third = await apply(client, ConfigMaps, cm({ data: { a: '2' } }));
    assert.equal(third.operation, 'updated');
    const applied = client.writes()[0];
    assert.equal(applied?.opts?.fieldManager, 'stub-manager');
    assert.equal((applied?.patch as { force?: boolean } | undefined)?.force, false);
    assert.deepEqual(third.object.data, { a: '2' });
  });

  it('can read the live object from a reader', async () => {
    const client = new StubClient();
    const live = client.seed(ConfigMaps, cm({ data: { a: '1' } }));
    const result = await apply(client, ConfigMaps, cm({ data: { a: '1' } }), { reader: { get: () => live } });
    assert.equal(result.operation, 'unchanged');
    assert.equal(client.actions.length, 0);
  });
});
