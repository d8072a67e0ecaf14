import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProtobufDecoder } from '../../src/client/protobuf/decode.ts';
import { ProtobufEncoder, parseTime } from '../../src/client/protobuf/encode.ts';
import { envelope } from '../../src/client/protobuf/frames.ts';
import { ProtobufWriter } from '../../src/client/protobuf/writer.ts';

const encoder = new ProtobufEncoder();
const decoder = new ProtobufDecoder();

/** Encodes, then decodes with the watch decoders: what the server would read back. */
function roundTrip(apiVersion: string, kind: string, obj: unknown): Record<string, unknown> {
  const bytes = encoder.encode(apiVersion, kind, obj);
  assert.ok(bytes, 'the encoder gave up');
  const e = envelope(bytes);
  assert.equal(e.apiVersion, apiVersion);
  assert.equal(e.kind, kind);
  return decoder.object(apiVersion, kind, bytes, e.start, e.end);
}

describe('protobuf request bodies', () => {
  it('encodes what the decoders read back: strings of every length, maps, lists, ints, bools, nested messages', () => {
    const long = 'x'.repeat(20_000); // a 3-byte length, inside messages whose lengths grow past 1 and 2 bytes
    const cm = roundTrip('v1', 'ConfigMap', {
      metadata: { name: 'c', namespace: 'ns', labels: { a: 'b', é: '✓' } },
      data: { short: '', long, unicode: 'é ✓ 😀' },
      binaryData: { b: 'AAEC' },
      immutable: false,
    }) as {
      metadata: Record<string, unknown>;
      data: Record<string, string>;
      binaryData: Record<string, string>;
    };
    assert.equal(cm.metadata.name, 'c');
    assert.deepEqual(cm.metadata.labels, { a: 'b', é: '✓' });
    assert.deepEqual(cm.data, { short: '', long, unicode: 'é ✓ 😀' });
    assert.deepEqual(cm.binaryData, { b: 'AAEC' });
    const sts = roundTrip('apps/v1', 'StatefulSet', {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: {
        name: 's',
        ownerReferences: [{ apiVersion: 'x/v1', kind: 'D', name: 'd', uid: 'u', controller: true }],
      },
      spec: {
        replicas: 0,
        serviceName: 'h',
        selector: { matchLabels: { app: 'db' } },
        template: {
          spec: {
            containers: [
              {
                name: 'c',
                image: 'i',
                ports: [{ containerPort: 5432 }],
                livenessProbe: { tcpSocket: { port: 'pg' } },
              },
            ],
            volumes: [{ name: 'v', emptyDir: {} }],
          },
        },
        volumeClaimTemplates: [
          {
            apiVersion: 'v1',
            kind: 'PersistentVolumeClaim',
            metadata: { name: 'data' },
            spec: { resources: { requests: { storage: '1Gi' } } },
          },
        ],
      },
    }) as {
      spec: Record<string, unknown> & {
        template: { spec: { containers: Record<string, unknown>[]; volumes: unknown[] } };
      };
    };
    assert.equal(sts.spec.replicas, 0, 'a pointer set to 0 stays set');
    const container = sts.spec.template.spec.containers[0] as {
      livenessProbe: { tcpSocket: { port: unknown } };
    };
    assert.equal(container.livenessProbe.tcpSocket.port, 'pg');
    assert.deepEqual(sts.spec.template.spec.volumes, [{ name: 'v', emptyDir: {} }]);
    const claims = sts.spec.volumeClaimTemplates as { spec: { resources: { requests: unknown } } }[];
    assert.deepEqual(claims[0]?.spec.resources.requests, { storage: '1Gi' });
  });

  it('encodes times as Go parses them, and Events with their micro-times', () => {
    const ev = roundTrip('events.k8s.io/v1', 'Event', {
      metadata: { name: 'e', namespace: 'ns' },
      eventTime: '2026-12-06T10:00:00.500000Z',
      series: { count: 2, lastObservedTime: '2026-12-06T10:00:01.000001Z' },
      regarding: { kind: 'Pod', name: 'p' },
      type: 'Normal',
    }) as { eventTime: string; series: { lastObservedTime: string } };
    assert.equal(ev.eventTime, '2026-12-06T10:00:00.500000Z');
    assert.equal(ev.series.lastObservedTime, '2026-12-06T10:00:01.000001Z');
    assert.deepEqual(parseTime('2026-12-06T10:00:00Z', false), {
      seconds: Date.UTC(2026, 11, 6, 10) / 1000,
      nanos: 0,
    });
    assert.deepEqual(parseTime('2026-12-06T12:00:00.25+02:00', false), {
      seconds: Date.UTC(2026, 11, 6, 10) / 1000,
      nanos: 250_000_000,
    });
    assert.deepEqual(parseTime('0001-01-01T00:00:00Z', false), { seconds: -62135596800, nanos: 0 });
    for (const bad of [
      '2026-02-30T00:00:00Z',
      '2026-12-06T24:00:00Z',
      '2026-12-06 10:00:00Z',
      '2026-12-06T10:00:00',
    ]) {
      assert.equal(parseTime(bad, false), undefined, bad);
    }
    // MicroTime's layout has exactly six fraction digits: Go refuses others, so they go as JSON.
    assert.equal(parseTime('2026-12-06T10:00:00Z', true), undefined);
    assert.equal(parseTime('2026-12-06T10:00:00.5Z', true), undefined);
  });

  it('gives up (the body goes as JSON) on anything it cannot say exactly as JSON says it', () => {
    const cm = (extra: Record<string, unknown>) => ({ metadata: { name: 'c', namespace: 'ns' }, ...extra });
    const cases: [string, unknown][] = [
      ['a key the schema does not have', cm({ notAField: 1 })],
      ['a nested key the schema does not have', { metadata: { name: 'c', nope: 'x' } }],
      ['a string field given a number', cm({ data: { k: 1 } })],
      ['a null map value', cm({ data: { k: null } })],
      ['bytes that are not canonical base64', cm({ binaryData: { b: 'AAE' } })],
      ['another kind', { kind: 'Secret', metadata: { name: 'c' } }],
      ['a Date', cm({ metadata: { name: 'c', creationTimestamp: new Date() } })],
      ['a time Go would not parse', cm({ metadata: { name: 'c', creationTimestamp: 'yesterday' } })],
    ];
    for (const [why, obj] of cases) assert.equal(encoder.encode('v1', 'ConfigMap', obj), undefined, why);
    const sts = (spec: Record<string, unknown>) => ({
      metadata: { name: 's' },
      spec: { selector: {}, template: {}, ...spec },
    });
    assert.ok(encoder.encode('apps/v1', 'StatefulSet', sts({ replicas: 3 })));
    for (const [why, spec] of [
      [
        'a negative int (int32 and int64 look alike; protobuf would not refuse what JSON does)',
        { replicas: -1 },
      ],
      ['an int past int32', { replicas: 2 ** 31 }],
      ['a fraction in an int', { replicas: 1.5 }],
      ['a null in a list', { volumeClaimTemplates: [null] }],
      ['a list given an object', { volumeClaimTemplates: {} }],
    ] as const) {
      assert.equal(encoder.encode('apps/v1', 'StatefulSet', sts(spec)), undefined, why);
    }
    const pvc = (storage: unknown) => ({
      metadata: { name: 'p' },
      spec: { resources: { requests: { storage } } },
    });
    assert.ok(encoder.encode('v1', 'PersistentVolumeClaim', pvc('250Mi')));
    assert.ok(encoder.encode('v1', 'PersistentVolumeClaim', pvc('1.5e3')));
    for (const bad of ['lots', '1 Gi', 5]) {
      assert.equal(encoder.encode('v1', 'PersistentVolumeClaim', pvc(bad)), undefined, `Quantity ${bad}`);
    }
    assert.equal(
      encoder.encode('example.com/v1', 'Database', { metadata: { name: 'd' } }),
      undefined,
      'a custom resource',
    );
  });
});

describe('ProtobufWriter', () => {
  it('writes a length-delimited value of any size with the shortest length varint', () => {
    for (const size of [0, 1, 127, 128, 16_383, 16_384, 2_097_152]) {
      const w = new ProtobufWriter(8);
      w.tag(1, 2);
      const at = w.begin();
      w.raw(Buffer.alloc(size, 7));
      w.end(at);
      w.tag(2, 0);
      w.varint(300);
      const out = w.finish();
      const lengthBytes = size < 128 ? 1 : size < 16_384 ? 2 : size < 2_097_152 ? 3 : 4;
      assert.equal(out.length, 1 + lengthBytes + size + 3, `size ${size}`);
      // The length varint, then the content, then field 2 = 300 (0xac 0x02).
      let len = 0;
      for (let i = 0, scale = 1; i < lengthBytes; i++, scale *= 128) len += (out[1 + i]! & 0x7f) * scale;
      assert.equal(len, size);
      assert.deepEqual([...out.subarray(out.length - 3)], [0x10, 0xac, 0x02]);
    }
  });

  it('writes negative ints as 10-byte two’s complement varints', () => {
    const w = new ProtobufWriter();
    w.signed(-1);
    assert.deepEqual([...w.finish()], [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
  });
});
