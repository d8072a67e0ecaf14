/**
 * The protobuf decoders against a real kube-apiserver: for every kind of the schema, objects with many
 * fields set are read back as JSON and as protobuf, and the decoded protobuf must equal the JSON exactly
 * (values and key order). Then a watch through the client with wireFormat 'protobuf' must deliver what
 * one with 'json' delivers.
 */
import assert from 'node:assert/strict';
import { request } from 'node:https';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import { ConfigMaps, Namespaces } from '../../src/api/builtin.ts';
import type { KubeObject } from '../../src/api/object.ts';
import {
  BadRequestError,
  createClient,
  loadConfig,
  type RestClient,
  type RestConfig,
} from '../../src/client/index.ts';
import { ProtobufDecoder } from '../../src/client/protobuf/decode.ts';
import { sharedEncoder } from '../../src/client/protobuf/encode.ts';
import { envelope, PROTOBUF } from '../../src/client/protobuf/frames.ts';
import { SCHEMA } from '../../src/client/protobuf/schema.generated.ts';

let cp: ControlPlane;
let config: RestConfig;
let client: RestClient;
const NS = 'pb';

const meta = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  labels: { app: 'db', 'app.kubernetes.io/instance': name },
  annotations: { note: 'quote " backslash \\ newline \n unicode é ✓' },
  ...extra,
});

const podSpec = {
  serviceAccountName: 'sa',
  terminationGracePeriodSeconds: 30,
  securityContext: { runAsUser: 999, runAsNonRoot: true, fsGroup: 999, sysctls: [] },
  tolerations: [{ key: 'k', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 60 }],
  affinity: {
    podAntiAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [
        {
          weight: 100,
          podAffinityTerm: {
            topologyKey: 'kubernetes.io/hostname',
            labelSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['db'] }] },
          },
        },
      ],
    },
  },
  containers: [
    {
      name: 'server',
      image: 'local/postgres:15',
      command: ['sh', '-c'],
      args: ['exec postgres'],
      ports: [{ name: 'pg', containerPort: 5432, protocol: 'TCP' }],
      env: [
        { name: 'A', value: 'a' },
        { name: 'B', valueFrom: { secretKeyRef: { name: 's', key: 'password', optional: false } } },
        { name: 'C', valueFrom: { configMapKeyRef: { name: 'c', key: 'k' } } },
        { name: 'D', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      ],
      resources: { requests: { cpu: '250m', memory: '512Mi' }, limits: { memory: '1Gi' } },
      readinessProbe: { exec: { command: ['pg_isready'] }, periodSeconds: 5, failureThreshold: 3 },
      livenessProbe: { tcpSocket: { port: 'pg' }, initialDelaySeconds: 10 },
      startupProbe: { httpGet: { path: '/healthz', port: 8080, scheme: 'HTTP' } },
      volumeMounts: [{ name: 'data', mountPath: '/var/lib/postgresql/data', subPath: 'pgdata' }],
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
    },
  ],
  volumes: [
    { name: 'scripts', configMap: { name: 'c', defaultMode: 0o755, items: [{ key: 'k', path: 'k.sh' }] } },
    { name: 'creds', secret: { secretName: 's', optional: true } },
    { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
    {
      name: 'projected',
      projected: { sources: [{ serviceAccountToken: { path: 'token', expirationSeconds: 3600 } }] },
    },
  ],
};

/** Objects of every kind in the schema, by list path; each with many of its fields set. */
function objects(): { path: string; body: Record<string, unknown> }[] {
  const selector = { matchLabels: { app: 'db' } };
  const template = { metadata: { labels: { app: 'db' } }, spec: podSpec };
  return [
    {
      path: `/api/v1/namespaces/${NS}/configmaps`,
      body: {
        metadata: meta('c'),
        data: { k: '#!/bin/sh\necho "hi"\n', empty: '' },
        binaryData: { b: 'AAEC' },
      },
    },
    {
      path: `/api/v1/namespaces/${NS}/secrets`,
      body: {
        metadata: meta('s'),
        type: 'Opaque',
        data: { password: 'c2VjcmV0', none: '' },
        immutable: true,
      },
    },
    {
      path: `/api/v1/namespaces/${NS}/services`,
      body: {
        metadata: meta('svc', { finalizers: ['example.com/keep'] }),
        spec: {
          selector: { app: 'db' },
          ports: [
            { name: 'pg', port: 5432, targetPort: 'pg' },
            { name: 'metrics', port: 9187, targetPort: 9187, protocol: 'TCP' },
          ],
          publishNotReadyAddresses: true,
        },
      },
    },
    {
      path: `/api/v1/namespaces/${NS}/services`,
      body: { metadata: meta('headless'), spec: { clusterIP: 'None', ports: [{ port: 5432 }] } },
    },
    {
      path: `/api/v1/namespaces/${NS}/pods`,
      body: {
        metadata: meta('pod'),
        spec: {
          ...podSpec,
          volumes: [...podSpec.volumes, { name: 'data', persistentVolumeClaim: { claimName: 'pvc' } }],
        },
      },
    },
    {
      path: `/api/v1/namespaces/${NS}/persistentvolumeclaims`,
      body: {
        metadata: meta('pvc'),
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
      },
    },
    {
      path: '/api/v1/persistentvolumes',
      body: {
        metadata: meta('pv'),
        spec: {
          capacity: { storage: '10Gi' },
          accessModes: ['ReadWriteOnce'],
          hostPath: { path: '/data/pv', type: 'DirectoryOrCreate' },
          persistentVolumeReclaimPolicy: 'Retain',
        },
      },
    },
    { path: '/api/v1/namespaces', body: { metadata: meta('pb-other') } },
    {
      path: '/api/v1/nodes',
      body: {
        metadata: meta('node-1'),
        spec: { taints: [{ key: 'dedicated', value: 'db', effect: 'NoSchedule' }], podCIDR: '10.0.0.0/24' },
      },
    },
    {
      path: `/api/v1/namespaces/${NS}/serviceaccounts`,
      body: { metadata: meta('sa'), automountServiceAccountToken: false },
    },
    {
      path: `/apis/apps/v1/namespaces/${NS}/statefulsets`,
      body: {
        metadata: meta('sts'),
        spec: {
          replicas: 3,
          serviceName: 'headless',
          selector,
          podManagementPolicy: 'Parallel',
          updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 0, maxUnavailable: 1 } },
          template,
          volumeClaimTemplates: [
            {
              metadata: { name: 'data' },
              spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
            },
          ],
        },
      },
    },
    {
      path: `/apis/apps/v1/namespaces/${NS}/deployments`,
      body: {
        metadata: meta('deploy'),
        spec: {
          replicas: 0,
          selector,
          strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: '25%', maxUnavailable: 0 } },
          template: {
            ...template,
            spec: { ...podSpec, volumes: [...podSpec.volumes, { name: 'data', emptyDir: {} }] },
          },
        },
      },
    },
    {
      path: `/apis/policy/v1/namespaces/${NS}/poddisruptionbudgets`,
      body: { metadata: meta('pdb'), spec: { selector, maxUnavailable: 1 } },
    },
    {
      path: `/apis/policy/v1/namespaces/${NS}/poddisruptionbudgets`,
      body: { metadata: meta('pdb-pct'), spec: { selector, minAvailable: '50%' } },
    },
    {
      path: `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`,
      body: {
        metadata: meta('lease'),
        spec: {
          holderIdentity: 'me',
          leaseDurationSeconds: 15,
          acquireTime: '2026-12-06T10:00:00.123456Z',
          renewTime: '2026-12-06T10:00:05.000001Z',
          leaseTransitions: 2,
        },
      },
    },
    {
      path: `/apis/events.k8s.io/v1/namespaces/${NS}/events`,
      body: {
        metadata: meta('ev'),
        eventTime: '2026-12-06T10:00:00.500000Z',
        reportingController: 'example.com/c',
        reportingInstance: 'i',
        action: 'Create',
        reason: 'Created',
        type: 'Normal',
        note: 'Created StatefulSet sts',
        regarding: { kind: 'StatefulSet', namespace: NS, name: 'sts', apiVersion: 'apps/v1' },
        series: { count: 2, lastObservedTime: '2026-12-06T10:00:01.000000Z' },
      },
    },
    {
      path: '/apis/storage.k8s.io/v1/storageclasses',
      body: {
        metadata: meta('fast'),
        provisioner: 'example.com/hostpath',
        parameters: { type: 'ssd' },
        reclaimPolicy: 'Delete',
        allowVolumeExpansion: true,
        volumeBindingMode: 'WaitForFirstConsumer',
      },
    },
    {
      path: `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles`,
      body: {
        metadata: meta('role'),
        rules: [{ apiGroups: [''], resources: ['pods', 'pods/exec'], verbs: ['get', 'create'] }],
      },
    },
    {
      path: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
      body: {
        metadata: meta('pb-clusterrole'),
        rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }],
        aggregationRule: { clusterRoleSelectors: [{ matchLabels: { aggregate: 'true' } }] },
      },
    },
    {
      path: `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/rolebindings`,
      body: {
        metadata: meta('rb'),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'role' },
        subjects: [{ kind: 'ServiceAccount', name: 'sa', namespace: NS }],
      },
    },
    {
      path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      body: {
        metadata: meta('pb-crb'),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'pb-clusterrole' },
        subjects: [{ kind: 'User', name: 'alice', apiGroup: 'rbac.authorization.k8s.io' }],
      },
    },
  ];
}

/** A raw GET with the client's credentials: the body's bytes and Content-Type. */
async function get(path: string, accept: string): Promise<{ body: Buffer; type: string }> {
  const auth = await config.authenticate();
  const { headers, ...tls } = auth;
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, config.server), { ...tls, headers: { ...headers, accept } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`GET ${path}: ${res.statusCode}`));
        else resolve({ body: Buffer.concat(chunks), type: res.headers['content-type'] ?? '' });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

before(
  async () => {
    cp = await start({ mode: 'apiserver' });
    config = loadConfig({ kubeconfig: cp.kubeconfigPath });
    client = createClient(config, { fieldManager: 'opkit-test', wireFormat: 'json' });
    await client.create(Namespaces, { metadata: { name: NS } });
  },
  { timeout: 180_000 },
);

after(async () => {
  client?.close();
  await cp?.stop();
});

describe('protobuf decoding against a real API server', () => {
  test('every kind of the schema decodes to exactly the JSON the server sends', async () => {
    const decoder = new ProtobufDecoder();
    const paths = new Set<string>();
    for (const { path, body } of objects()) {
      await postJson(path, body);
      paths.add(path);
    }
    const covered = new Set<string>();
    for (const path of paths) {
      const json = JSON.parse((await get(path, 'application/json')).body.toString('utf8')) as {
        apiVersion: string;
        kind: string;
        metadata: unknown;
        items: KubeObject[];
      };
      const pb = await get(path, PROTOBUF);
      assert.equal(pb.type, PROTOBUF, path);
      const env = envelope(pb.body);
      assert.equal(env.kind, json.kind);
      const kind = json.kind.replace(/List$/, '');
      const list = decoder.list(json.apiVersion, kind, pb.body, env.start, env.end);
      assert.ok(json.items.length > 0, path);
      assert.deepEqual(list.items, json.items, path);
      // Key order too: Go's JSON encoder writes fields in declaration order.
      assert.equal(JSON.stringify(list.items), JSON.stringify(json.items), path);
      assert.deepEqual(list.metadata, json.metadata, path);
      covered.add(`${json.apiVersion}/${kind}`);
    }
    const untested = Object.keys(SCHEMA.kinds).filter((k) => !covered.has(k) && k !== 'v1/Status');
    assert.deepEqual(untested, [], 'kinds of the schema without an object in this test');
  });

  test('a watch over protobuf delivers what a watch over JSON delivers, managedFields cut in both', async () => {
    const pbClient = createClient(config, { fieldManager: 'opkit-test', wireFormat: 'protobuf' });
    try {
      for (let i = 0; i < 20; i++) {
        await client.create(ConfigMaps, {
          metadata: { namespace: NS, name: `w-${i}` },
          data: { script: `#!/bin/sh\n${'echo "line"\n'.repeat(200 + i)}` },
        });
      }
      const initial = async (c: RestClient) => {
        const seen: unknown[] = [];
        const stop = new AbortController();
        for await (const ev of c.watch(ConfigMaps, {
          namespace: NS,
          sendInitialEvents: true,
          allowWatchBookmarks: true,
          omitManagedFields: true,
          signal: stop.signal,
        })) {
          seen.push(ev);
          const md = ev.object.metadata;
          if (ev.type === 'BOOKMARK' && md.annotations?.['k8s.io/initial-events-end'] === 'true') break;
        }
        stop.abort();
        return seen;
      };
      // Counts what the protobuf client decodes: a client that fell back to JSON would decode nothing.
      let decoded = 0;
      const object = ProtobufDecoder.prototype.object;
      ProtobufDecoder.prototype.object = function (this: ProtobufDecoder, ...args) {
        decoded++;
        return object.apply(this, args);
      };
      let overJson: unknown[];
      let overPb: unknown[];
      try {
        overJson = await initial(client);
        assert.equal(decoded, 0, 'the JSON client decoded protobuf');
        overPb = await initial(pbClient);
      } finally {
        ProtobufDecoder.prototype.object = object;
      }
      assert.ok(decoded > 20, `the protobuf client decoded ${decoded} objects`);
      assert.ok(overJson.length > 20);
      const objectsOf = (events: unknown[]) =>
        (events as { type: string; object: KubeObject }[]).filter((e) => e.type === 'ADDED');
      assert.deepEqual(objectsOf(overPb), objectsOf(overJson));
      for (const e of objectsOf(overPb)) assert.equal(e.object.metadata.managedFields, undefined);
    } finally {
      pbClient.close();
    }
  });

  test('an error answer to a protobuf watch (a Status in protobuf) is the same typed error as over JSON', async () => {
    const pbClient = createClient(config, { fieldManager: 'opkit-test', wireFormat: 'protobuf' });
    const failure = async (c: RestClient): Promise<Error> => {
      try {
        for await (const _ of c.watch(ConfigMaps, { namespace: NS, labelSelector: 'app in (' })) break;
      } catch (err) {
        return err as Error;
      }
      throw new Error('the watch did not fail');
    };
    try {
      const [overJson, overPb] = [await failure(client), await failure(pbClient)];
      assert.ok(overJson instanceof BadRequestError, String(overJson));
      assert.ok(overPb instanceof BadRequestError, String(overPb));
      assert.equal(overPb.message, overJson.message);
      assert.deepEqual(overPb.status, overJson.status);
    } finally {
      pbClient.close();
    }
  });
});

describe('protobuf request bodies against a real API server', () => {
  /** What the server made of an object, without what differs between two creates of it. */
  const stored = async (path: string, name: string): Promise<Record<string, unknown>> => {
    const obj = JSON.parse((await get(`${path}/${name}`, 'application/json')).body.toString('utf8')) as {
      metadata: Record<string, unknown> & { labels?: Record<string, string> };
      spec?: Record<string, unknown>;
      status?: Record<string, unknown>;
    };
    for (const k of ['name', 'uid', 'resourceVersion', 'creationTimestamp', 'managedFields'])
      delete obj.metadata[k];
    delete obj.metadata.labels?.['kubernetes.io/metadata.name']; // a Namespace's own name
    delete obj.metadata.labels?.['app.kubernetes.io/instance'];
    delete obj.spec?.clusterIP; // allocated
    delete obj.spec?.clusterIPs;
    delete obj.status?.lastPhaseTransitionTime;
    return obj;
  };

  test('every kind of the schema, created from a protobuf body, is stored as when created from JSON', async () => {
    const encoder = sharedEncoder();
    const covered = new Set<string>();
    for (const { path, body } of objects()) {
      const list = JSON.parse((await get(path, 'application/json')).body.toString('utf8')) as {
        apiVersion: string;
        kind: string;
      };
      const kind = list.kind.replace(/List$/, '');
      const base = (body.metadata as { name: string }).name;
      const named = (suffix: string) => ({
        ...body,
        metadata: { ...(body.metadata as object), name: `${base}-${suffix}` },
      });
      await postJson(path, named('j'));
      const bytes = encoder.encode(list.apiVersion, kind, {
        apiVersion: list.apiVersion,
        kind,
        ...named('p'),
      });
      assert.ok(bytes, `${list.apiVersion} ${kind}: the encoder gave up on the test object`);
      await post(path, bytes, PROTOBUF);
      assert.deepEqual(await stored(path, `${base}-p`), await stored(path, `${base}-j`), `${path} ${base}`);
      covered.add(`${list.apiVersion}/${kind}`);
    }
    const untested = Object.keys(SCHEMA.kinds).filter((k) => !covered.has(k) && k !== 'v1/Status');
    assert.deepEqual(untested, [], 'kinds of the schema without an object in this test');
  });

  test('the client sends protobuf for built-in kinds and JSON for what the encoder cannot say exactly', async () => {
    const pbClient = createClient(config, { fieldManager: 'opkit-test', wireFormat: 'protobuf' });
    let encoded = 0;
    let gaveUp = 0;
    const encode = Object.getPrototypeOf(sharedEncoder()).encode as (...a: unknown[]) => Buffer | undefined;
    const proto = Object.getPrototypeOf(sharedEncoder()) as { encode: typeof encode };
    proto.encode = function (this: unknown, ...args: unknown[]) {
      const out = encode.apply(this, args);
      if (out) encoded++;
      else gaveUp++;
      return out;
    };
    try {
      const created = await pbClient.create(ConfigMaps, {
        metadata: { namespace: NS, name: 'body-pb', labels: { a: 'b' } },
        data: { script: '#!/bin/sh\necho "é ✓"\n'.repeat(50) },
      });
      assert.equal(encoded, 1);
      assert.equal(created.data?.script, '#!/bin/sh\necho "é ✓"\n'.repeat(50));
      const updated = await pbClient.update(ConfigMaps, { ...created, data: { script: 'new' } });
      assert.equal(encoded, 2);
      assert.deepEqual(updated.data, { script: 'new' });
      // A key the schema does not have: JSON, where the server drops it (with a warning), as before.
      const odd = await pbClient.create(ConfigMaps, {
        metadata: { namespace: NS, name: 'body-json' },
        data: { k: 'v' },
        notAField: true,
      } as never);
      assert.equal(gaveUp, 1);
      assert.deepEqual(odd.data, { k: 'v' });
      // The JSON client never encodes.
      await client.create(ConfigMaps, { metadata: { namespace: NS, name: 'body-json-2' }, data: { k: 'v' } });
      assert.equal(encoded + gaveUp, 3);
    } finally {
      proto.encode = encode;
      pbClient.close();
    }
  });
});

/** A raw POST with the client's credentials; rejects unless the server answers 200 or 201. */
async function post(path: string, payload: Buffer, contentType: string): Promise<void> {
  const auth = await config.authenticate();
  const { headers, ...tls } = auth;
  await new Promise<void>((resolve, reject) => {
    const req = request(
      new URL(path, config.server),
      {
        ...tls,
        method: 'POST',
        headers: { ...headers, 'content-type': contentType, accept: 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          if (res.statusCode === 201 || res.statusCode === 200) resolve();
          else reject(new Error(`POST ${path}: ${res.statusCode} ${Buffer.concat(chunks).toString()}`));
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function postJson(path: string, body: Record<string, unknown>): Promise<void> {
  await post(path, Buffer.from(JSON.stringify(body)), 'application/json');
}
