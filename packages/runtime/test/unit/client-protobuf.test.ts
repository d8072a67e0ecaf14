/**
 * The protobuf decoders on bytes built here (a minimal encoder below), for the rules of Go's JSON encoder
 * they follow and the errors they raise; the watch frames; the client's fallback to JSON. Fidelity against
 * a real API server: test/integration/protobuf.test.ts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { ConfigMaps } from '../../src/api/builtin.ts';
import { ConnectionError, createClient, ForbiddenError, wireFormatFrom } from '../../src/client/index.ts';
import { ProtobufDecoder, ProtobufSchemaError } from '../../src/client/protobuf/decode.ts';
import {
  envelope,
  FrameDecoder,
  PROTOBUF,
  PROTOBUF_WATCH,
  watchEvent,
} from '../../src/client/protobuf/frames.ts';
import { goDuration } from '../../src/client/protobuf/runtime.ts';
import { deepFreezeJson } from '../../src/util/freeze.ts';
import { startLocalServer } from './local-http.ts';

// ---- a minimal protobuf encoder
function varint(n: number | bigint): number[] {
  let v = BigInt.asUintN(64, BigInt(n));
  const out: number[] = [];
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return out;
}
type Field = number[];
const int = (n: number, v: number | bigint): Field => [...varint(n << 3), ...varint(v)];
const bytes = (n: number, b: Uint8Array | number[]): Field => [
  ...varint((n << 3) | 2),
  ...varint(b.length),
  ...b,
];
const str = (n: number, s: string): Field => bytes(n, [...Buffer.from(s, 'utf8')]);
const msg = (n: number, ...fields: Field[]): Field => bytes(n, fields.flat());
const entry = (n: number, k: string, v: Field): Field => msg(n, str(1, k), v);
const buf = (...fields: Field[]): Buffer => Buffer.from(fields.flat());
const time = (n: number, seconds: number, nanos = 0): Field =>
  msg(n, int(1, seconds), ...(nanos ? [int(2, nanos)] : []));
const T0 = Date.UTC(2026, 11, 6, 10, 0, 0) / 1000;

const decoder = new ProtobufDecoder();

describe('protobuf objects decode as the API server JSON-encodes them', () => {
  test('a ConfigMap: metadata, maps, bytes as base64, fields in Go declaration order', () => {
    const cm = buf(
      msg(
        1,
        str(1, 'cm'),
        str(3, 'ns'),
        str(5, 'uid-1'),
        str(6, '42'),
        time(8, T0),
        entry(11, 'app', str(2, 'db')),
        entry(11, 'tier', str(2, '')),
        msg(13, str(1, 'Database'), str(3, 'db'), str(4, 'uid-0'), str(5, 'myapp.example.com/v1'), int(6, 1)),
        str(14, 'example.com/keep'),
      ),
      entry(2, 'script.sh', str(2, '#!/bin/sh\necho "é"\n')),
      entry(3, 'blob', bytes(2, [0, 1, 2, 255])),
    );
    const out = decoder.object('v1', 'ConfigMap', cm);
    assert.equal(
      JSON.stringify(out),
      JSON.stringify({
        kind: 'ConfigMap',
        apiVersion: 'v1',
        metadata: {
          name: 'cm',
          namespace: 'ns',
          uid: 'uid-1',
          resourceVersion: '42',
          creationTimestamp: '2026-12-06T10:00:00Z',
          labels: { app: 'db', tier: '' },
          ownerReferences: [
            {
              apiVersion: 'myapp.example.com/v1',
              kind: 'Database',
              name: 'db',
              uid: 'uid-0',
              controller: true,
            },
          ],
          finalizers: ['example.com/keep'],
        },
        data: { 'script.sh': '#!/bin/sh\necho "é"\n' },
        binaryData: { blob: 'AAEC/w==' },
      }),
    );
  });

  test('short strings come from a shared table: every value is still its own, collisions included', () => {
    // 20 000 distinct short names fill the 8192 slots many times over; each must come back as sent.
    for (let i = 0; i < 20_000; i++) {
      const name = `n-${i.toString(36)}`;
      const out = decoder.object('v1', 'ConfigMap', buf(msg(1, str(1, name), str(3, 'ns'))));
      assert.deepEqual(out.metadata, { name, namespace: 'ns' });
    }
    // Non-ASCII and long strings take the other path.
    for (const name of ['é', 'ü'.repeat(30), 'x'.repeat(25)]) {
      assert.equal(
        (decoder.object('v1', 'ConfigMap', buf(msg(1, str(1, name)))).metadata as { name: string }).name,
        name,
      );
    }
  });

  test('decoded objects are plain objects, as JSON.parse makes them', () => {
    const out = decoder.object('v1', 'Service', buf(msg(1, str(1, 's')), msg(2, msg(1, int(3, 80)))));
    const spec = out.spec as { ports: Record<string, unknown>[] };
    for (const o of [out, out.metadata, spec, spec.ports[0]]) {
      assert.equal(Object.getPrototypeOf(o), Object.prototype);
      assert.equal((o as object).constructor, Object);
    }
  });

  test('absent fields: omitempty ones left out, others as Go zero values (null slices, {} structs)', () => {
    const out = decoder.object('v1', 'Pod', buf(msg(1, str(1, 'p'))));
    assert.deepEqual(out, {
      kind: 'Pod',
      apiVersion: 'v1',
      metadata: { name: 'p' },
      spec: { containers: null },
      status: {},
    });
    // A Secret's immutable is a pointer: sent false, it is there as false.
    const secret = decoder.object('v1', 'Secret', buf(msg(1, str(1, 's')), int(5, 0)));
    assert.equal(secret.immutable, false);
    // A zero-valued scalar with omitempty is left out even when sent (gogo sends non-pointer strings always).
    const empty = decoder.object('v1', 'ConfigMap', buf(msg(1, str(1, 'c'), str(2, ''))));
    assert.deepEqual(empty.metadata, { name: 'c' });
  });

  test('negative and large integers, packed and unpacked repeated scalars', () => {
    const meta = msg(1, str(1, 'x'), int(7, -3), int(10, 2 ** 40));
    const out = decoder.object('v1', 'Pod', buf(meta));
    const md = out.metadata as Record<string, unknown>;
    assert.equal(md.generation, -3);
    assert.equal(md.deletionGracePeriodSeconds, 2 ** 40);
    // PodSecurityContext.supplementalGroups (field 4 of PodSecurityContext, []int64), in both encodings.
    const packed = msg(2, msg(14, bytes(4, [...varint(1), ...varint(2), ...varint(-1)])));
    const unpacked = msg(2, msg(14, int(4, 1), int(4, 2), int(4, -1)));
    for (const spec of [packed, unpacked]) {
      const pod = decoder.object('v1', 'Pod', buf(spec)) as {
        spec: { securityContext: Record<string, unknown> };
      };
      assert.deepEqual(pod.spec.securityContext.supplementalGroups, [1, 2, -1]);
    }
  });

  test('IntOrString, Quantity, MicroTime, the zero time', () => {
    // Service port: targetPort (field 4) as int and as string.
    const svc = buf(
      msg(1, str(1, 's')),
      msg(
        2,
        msg(1, int(3, 80), msg(4, int(1, 0), int(2, 8080))),
        msg(1, int(3, 81), msg(4, int(1, 1), str(3, 'http'))),
      ),
    );
    const ports = (decoder.object('v1', 'Service', svc) as { spec: { ports: { targetPort: unknown }[] } })
      .spec.ports;
    assert.deepEqual(
      ports.map((p) => p.targetPort),
      [8080, 'http'],
    );
    // PVC requests: map<string, Quantity>.
    const pvc = buf(msg(2, msg(2, entry(2, 'storage', msg(2, str(1, '1Gi'))))));
    const req = decoder.object('v1', 'PersistentVolumeClaim', pvc) as { spec: { resources: unknown } };
    assert.deepEqual(req.spec.resources, { requests: { storage: '1Gi' } });
    // Lease renewTime: MicroTime (microseconds, always six digits).
    const lease = decoder.object('coordination.k8s.io/v1', 'Lease', buf(msg(2, time(4, T0, 5_000))));
    assert.deepEqual(lease.spec, { renewTime: '2026-12-06T10:00:00.000005Z' });
    // creationTimestamp sent as the empty message or as Go's zero time: left out (omitzero).
    for (const zero of [bytes(8, []), time(8, -62135596800)]) {
      assert.deepEqual(decoder.object('v1', 'ConfigMap', buf(msg(1, str(1, 'c'), zero))).metadata, {
        name: 'c',
      });
    }
  });

  test('embedded structs are inlined; a StatefulSet claim template gets the kind the server sets', () => {
    // Volume {name = 1, VolumeSource = 2 (inline) {configMap = 19 {LocalObjectReference = 1 (inline) {name = 1}}}}
    const pod = buf(msg(2, msg(1, str(1, 'scripts'), msg(2, msg(19, msg(1, str(1, 'cm')), int(3, 0o755))))));
    const spec = (decoder.object('v1', 'Pod', pod) as { spec: { volumes: unknown[] } }).spec;
    assert.equal(
      JSON.stringify(spec.volumes),
      JSON.stringify([{ name: 'scripts', configMap: { name: 'cm', defaultMode: 493 } }]),
    );
    const sts = buf(msg(2, msg(4, msg(1, str(1, 'data')))));
    const out = decoder.object('apps/v1', 'StatefulSet', sts) as {
      spec: { volumeClaimTemplates: unknown[] };
    };
    assert.equal(
      JSON.stringify(out.spec.volumeClaimTemplates[0]),
      JSON.stringify({
        kind: 'PersistentVolumeClaim',
        apiVersion: 'v1',
        metadata: { name: 'data' },
        spec: { resources: {} }, // a struct: omitempty never leaves one out
        status: {},
      }),
    );
  });

  test('managedFields: skipped when asked, else decoded with their fieldsV1 as JSON', () => {
    const mf = msg(17, str(1, 'opkit'), str(2, 'Apply'), str(6, 'FieldsV1'), msg(7, str(1, '{"f:data":{}}')));
    const cm = buf(msg(1, str(1, 'c'), mf));
    assert.deepEqual(
      decoder.object('v1', 'ConfigMap', cm, 0, cm.length, { omitManagedFields: true }).metadata,
      {
        name: 'c',
      },
    );
    assert.deepEqual(decoder.object('v1', 'ConfigMap', cm).metadata, {
      name: 'c',
      managedFields: [
        { manager: 'opkit', operation: 'Apply', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': {} } },
      ],
    });
  });

  test('map entries: a missing bytes value is "" (gogo makes []byte{}), a __proto__ key an own property', () => {
    const secret = decoder.object(
      'v1',
      'Secret',
      buf(entry(2, 'empty', []), entry(2, 'k', bytes(2, [104, 105]))),
    );
    assert.deepEqual(secret.data, { empty: '', k: 'aGk=' });
    const cm = decoder.object(
      'v1',
      'ConfigMap',
      buf(entry(2, '__proto__', str(2, 'x')), entry(2, 'a', str(2, 'b'))),
    );
    const data = cm.data as Record<string, unknown>;
    assert.ok(Object.hasOwn(data, '__proto__'));
    assert.equal(Object.getPrototypeOf(data), Object.prototype);
    assert.deepEqual(data, JSON.parse('{"__proto__":"x","a":"b"}'));
  });

  test("omitManagedFields cuts the object's own managedFields only, as the JSON path does", () => {
    const mf = msg(17, str(1, 'kube-controller-manager'));
    // StatefulSet {metadata = 1 {managedFields}, spec = 2 {template = 3 {metadata = 1 {managedFields}}}}
    const sts = buf(msg(1, str(1, 's'), mf), msg(2, msg(3, msg(1, str(1, 't'), mf))));
    const out = decoder.object('apps/v1', 'StatefulSet', sts, 0, sts.length, { omitManagedFields: true }) as {
      metadata: Record<string, unknown>;
      spec: { template: { metadata: Record<string, unknown> } };
    };
    assert.deepEqual(out.metadata, { name: 's' });
    assert.deepEqual(out.spec.template.metadata.managedFields, [{ manager: 'kube-controller-manager' }]);
  });

  test('deepFreeze: what deepFreezeJson makes of the object, frozen while decoding', () => {
    const long = (c: string) => c.repeat(40);
    const mf = msg(
      17,
      str(1, 'opkit'),
      str(6, 'FieldsV1'),
      msg(7, str(1, `{"f:data":{"f:${long('k')}":{}}}`)),
    );
    // StatefulSet {metadata {name, labels, managedFields}, spec {template {spec {volumes (inline
    // sources), containers {command, ports}}}, volumeClaimTemplates (a nested kind)}}
    const volume = msg(1, str(1, 'scripts'), msg(2, msg(19, msg(1, str(1, long('c'))), int(3, 0o755))));
    const container = msg(2, str(1, 'db'), str(3, long('x')), str(3, 'run'), msg(6, int(3, 5432)));
    const sts = buf(
      msg(1, str(1, 's'), entry(11, 'app', str(2, long('l'))), mf),
      msg(2, int(1, 3), msg(3, msg(2, volume, container)), msg(4, msg(1, str(1, 'data')))),
    );
    const cm = buf(
      msg(1, str(1, 'c')),
      entry(2, 'script', str(2, long('s'))),
      entry(2, long('key'), str(2, 'v')), // keys are not interned, as deepFreezeJson does not
      entry(3, 'blob', bytes(2, [...Buffer.from(long('b'))])),
    );
    const interned: string[] = [];
    const strings = {
      minLength: 30,
      intern: (s: string) => {
        interned.push(s);
        return s;
      },
    };
    for (const [apiVersion, kind, bytesOf] of [
      ['apps/v1', 'StatefulSet', sts],
      ['v1', 'ConfigMap', cm],
    ] as const) {
      const plain = decoder.object(apiVersion, kind, bytesOf);
      assert.equal(Object.isFrozen(plain), false);
      interned.length = 0;
      deepFreezeJson(plain, strings);
      const walked = [...interned].sort();
      interned.length = 0;
      const frozen = decoder.object(apiVersion, kind, bytesOf, 0, bytesOf.length, {
        deepFreeze: { strings },
      });
      assert.equal(JSON.stringify(frozen), JSON.stringify(plain));
      assert.deepEqual([...interned].sort(), walked, 'the same strings go through the interner');
      const thawed: string[] = [];
      (function visit(value: unknown, path: string): void {
        if (typeof value !== 'object' || value === null) return;
        if (!Object.isFrozen(value)) thawed.push(path);
        for (const [k, v] of Object.entries(value)) visit(v, `${path}.${k}`);
      })(frozen, kind);
      assert.deepEqual(thawed, [], 'every object and array is frozen');
    }
    assert.ok(interned.length > 0);
    // The setting lasts one decode, also one that throws.
    assert.throws(
      () => decoder.object('v1', 'ConfigMap', buf(str(77, 'x')), 0, 3, { deepFreeze: {} }),
      ProtobufSchemaError,
    );
    const after = decoder.object('apps/v1', 'StatefulSet', sts);
    assert.equal(Object.isFrozen(after) || Object.isFrozen(after.metadata), false);
  });

  test('bytes the schema cannot account for throw ProtobufSchemaError, naming the message', () => {
    // A string whose length runs past the end of its message (inside the buffer and past it).
    const inner = [0x0a, 0x05, 0x61]; // ObjectMeta.name, 5 bytes announced, 1 there
    assert.throws(
      () => decoder.object('v1', 'ConfigMap', buf(bytes(1, inner), str(2, 'trailing'))),
      ProtobufSchemaError,
    );
    assert.throws(() => decoder.object('v1', 'ConfigMap', buf(bytes(1, inner))), ProtobufSchemaError);
    assert.throws(
      () => decoder.object('v1', 'ConfigMap', buf(str(99, 'new field'))),
      (err: Error) =>
        err instanceof ProtobufSchemaError && /core\.v1\.ConfigMap has no field 99/.test(err.message),
    );
    // A string where the schema has a bool (immutable = 4): the wrong wire type.
    assert.throws(() => decoder.object('v1', 'ConfigMap', buf(str(4, 'yes'))), ProtobufSchemaError);
    // Truncated: a length beyond the end.
    assert.throws(
      () => decoder.object('v1', 'ConfigMap', Buffer.from([0x0a, 0x10, 0x0a])),
      ProtobufSchemaError,
    );
    assert.throws(() => decoder.object('batch/v1', 'Job', buf()), /no protobuf layout for batch\/v1 Job/);
  });

  test('without code generation (--disallow-code-generation-from-strings) decoding throws ProtobufSchemaError', () => {
    const decodeTs = new URL('../../src/client/protobuf/decode.ts', import.meta.url).href;
    const run = spawnSync(
      process.execPath,
      [
        '--disallow-code-generation-from-strings',
        '--input-type=module',
        '-e',
        `const { ProtobufDecoder } = await import(${JSON.stringify(decodeTs)});
         try { new ProtobufDecoder().object('v1', 'ConfigMap', Buffer.from([0x0a, 0x03, 0x0a, 0x01, 0x61])); }
         catch (err) { console.log(err.name); }`,
      ],
      { encoding: 'utf8' },
    );
    assert.equal(run.stdout.trim(), 'ProtobufSchemaError', run.stderr);
  });

  test("Go's duration strings", () => {
    assert.equal(goDuration(0), '0s');
    assert.equal(goDuration(1500), '1.5µs');
    assert.equal(goDuration(2_000_000), '2ms');
    assert.equal(goDuration(90e9), '1m30s');
    assert.equal(goDuration(3.6e12 + 1e9), '1h0m1s');
    assert.equal(goDuration(-5e9), '-5s');
  });
});

/** `k8s\0` + runtime.Unknown {typeMeta {apiVersion, kind}, raw}. */
function enveloped(apiVersion: string, kind: string, raw: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from('k8s\0', 'latin1'),
    buf(msg(1, str(1, apiVersion), str(2, kind)), bytes(2, raw)),
  ]);
}

/** A watch stream frame: length + WatchEvent {type, object: RawExtension {raw: enveloped object}}. */
function frame(type: string, object: Buffer): Buffer {
  const event = buf(str(1, type), msg(2, bytes(1, object)));
  const len = Buffer.alloc(4);
  len.writeUInt32BE(event.length);
  return Buffer.concat([len, event]);
}

describe('protobuf envelopes and watch frames', () => {
  const cm = (name: string) =>
    enveloped('v1', 'ConfigMap', buf(msg(1, str(1, name)), entry(2, 'k', str(2, 'v'.repeat(50)))));

  test('an envelope gives the kind and the message bytes', () => {
    const e = envelope(cm('a'));
    assert.deepEqual([e.apiVersion, e.kind], ['v1', 'ConfigMap']);
    assert.throws(() => envelope(Buffer.from('{"kind":"Status"}')), ProtobufSchemaError);
  });

  test('frames split at every byte come out whole and in order', () => {
    const stream = Buffer.concat([
      frame('ADDED', cm('a')),
      frame('MODIFIED', cm('b')),
      frame('DELETED', cm('c')),
    ]);
    for (const size of [1, 2, 3, 7, 64, stream.length]) {
      const frames = new FrameDecoder();
      const events: string[] = [];
      for (let i = 0; i < stream.length; i += size) {
        for (const f of frames.write(stream.subarray(i, i + size))) {
          const ev = watchEvent(decoder, f, {});
          events.push(`${ev.type} ${(ev.object.metadata as { name: string }).name} ${ev.object.kind}`);
        }
      }
      assert.deepEqual(
        events,
        ['ADDED a ConfigMap', 'MODIFIED b ConfigMap', 'DELETED c ConfigMap'],
        `chunks of ${size}`,
      );
      assert.equal(frames.partial, false);
    }
    const frames = new FrameDecoder();
    frames.write(stream.subarray(0, 10));
    assert.equal(frames.partial, true);
  });

  test('a chunk that completes a frame is copied no further than that frame: the frames after it are views of the chunk', () => {
    const stream = Buffer.concat([frame('ADDED', cm('a')), frame('ADDED', cm('b')), frame('ADDED', cm('c'))]);
    const first = frame('ADDED', cm('a')).length;
    const frames = new FrameDecoder();
    assert.deepEqual(frames.write(stream.subarray(0, first - 5)), []);
    // A chunk in an ArrayBuffer of its own (Buffer.from would take a small one from the shared pool).
    const chunk = new Uint8Array(stream.subarray(first - 5));
    const out = frames.write(chunk);
    assert.equal(out.length, 3);
    assert.notEqual(out[0]?.buffer, chunk.buffer, 'the frame that spans two chunks is joined');
    assert.equal(out[1]?.buffer, chunk.buffer, 'the next frame is read in place');
    assert.equal(out[2]?.buffer, chunk.buffer);
    assert.deepEqual(
      out.map((f) => (watchEvent(decoder, f, {}).object.metadata as { name: string }).name),
      ['a', 'b', 'c'],
    );
    assert.equal(frames.partial, false);
  });
});

describe('the client over protobuf', () => {
  test('OPKIT_WIRE_FORMAT: json or protobuf; anything else is an error naming it', () => {
    assert.equal(wireFormatFrom(undefined), 'protobuf');
    assert.equal(wireFormatFrom('protobuf'), 'protobuf');
    assert.equal(wireFormatFrom('json'), 'json');
    assert.equal(wireFormatFrom('JSON'), 'json');
    assert.equal(wireFormatFrom('protobuf'), 'protobuf');
    assert.throws(() => wireFormatFrom('proto'), /OPKIT_WIRE_FORMAT=proto: expected json or protobuf/);
  });

  test("an error answer in protobuf (a Status) keeps its message; a cut-off stream is the connection's fault", async () => {
    const accepts: string[] = [];
    let call = 0;
    const server = await startLocalServer((req, res) => {
      accepts.push(String(req.headers.accept));
      call++;
      if (call === 1) {
        const status = buf(
          msg(1),
          str(2, 'Failure'),
          str(3, 'configmaps is forbidden: not for you'),
          str(4, 'Forbidden'),
          int(6, 403),
        );
        res.writeHead(403, { 'Content-Type': PROTOBUF });
        res.end(enveloped('v1', 'Status', status));
        return;
      }
      res.writeHead(200, { 'Content-Type': PROTOBUF_WATCH });
      // Half a frame, then the end of the response.
      const f = frame('ADDED', enveloped('v1', 'ConfigMap', buf(msg(1, str(1, 'a')))));
      res.end(f.subarray(0, f.length - 3));
    });
    const client = createClient(server.config, { wireFormat: 'protobuf' });
    try {
      await assert.rejects(
        async () => {
          for await (const _ of client.watch(ConfigMaps, { namespace: 'ns' }))
            assert.fail('no events expected');
        },
        (err: Error) =>
          err instanceof ForbiddenError &&
          err.message === 'configmaps is forbidden: not for you' &&
          err.status.reason === 'Forbidden',
      );
      await assert.rejects(
        async () => {
          for await (const _ of client.watch(ConfigMaps, { namespace: 'ns' }))
            assert.fail('no events expected');
        },
        (err: Error) => err instanceof ConnectionError && !(err instanceof ProtobufSchemaError),
      );
      // Still protobuf: neither was the schema's fault.
      for await (const _ of client.watch(ConfigMaps, { namespace: 'ns' })) break;
    } catch {
      // the third watch fails the same way; only its Accept header matters
    } finally {
      client.close();
      await server.close();
    }
    assert.equal(accepts.length, 3);
    for (const accept of accepts) assert.match(accept, /^application\/vnd\.kubernetes\.protobuf/);
  });

  test('asks for protobuf for built-in kinds, decodes it, and falls back to JSON when it cannot', async () => {
    const accepts: string[] = [];
    let calls = 0;
    const server = await startLocalServer((req, res) => {
      accepts.push(String(req.headers.accept));
      calls++;
      if (String(req.headers.accept).includes('protobuf')) {
        res.writeHead(200, { 'Content-Type': PROTOBUF_WATCH });
        // The first: a good event; the second: an object with a field the schema does not know.
        res.write(frame('ADDED', cm('a')));
        res.end(frame('ADDED', enveloped('v1', 'ConfigMap', buf(msg(1, str(1, 'b')), str(77, 'future')))));
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(
        `${JSON.stringify({ type: 'ADDED', object: { kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: 'b' } } })}\n`,
      );
    });
    function cm(name: string) {
      return enveloped('v1', 'ConfigMap', buf(msg(1, str(1, name))));
    }
    const client = createClient(server.config, { wireFormat: 'protobuf' });
    try {
      const first: string[] = [];
      await assert.rejects(async () => {
        for await (const ev of client.watch(ConfigMaps, { namespace: 'ns' }))
          first.push(ev.object.metadata.name ?? '');
      }, ProtobufSchemaError);
      assert.deepEqual(first, ['a']);
      const second: string[] = [];
      for await (const ev of client.watch(ConfigMaps, { namespace: 'ns' }))
        second.push(ev.object.metadata.name ?? '');
      assert.deepEqual(second, ['b']);
      assert.equal(calls, 2);
      assert.match(accepts[0]!, /^application\/vnd\.kubernetes\.protobuf, application\/json$/);
      assert.equal(accepts[1], 'application/json');
    } finally {
      client.close();
      await server.close();
    }
    // JSON clients never ask for protobuf.
    const jsonServer = await startLocalServer((req, res) => {
      accepts.push(String(req.headers.accept));
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end();
    });
    const jsonClient = createClient(jsonServer.config, { wireFormat: 'json' });
    try {
      for await (const _ of jsonClient.watch(ConfigMaps, { namespace: 'ns' }))
        assert.fail('no events expected');
      assert.equal(accepts.at(-1), 'application/json');
    } finally {
      jsonClient.close();
      await jsonServer.close();
    }
  });
});
