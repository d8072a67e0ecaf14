/**
 * The StatefulSet per engine: image, port, probes, env from the Secret only (and no password anywhere in
 * it), data in a subdirectory of the volume, restricted security context, anti-affinity, the volume
 * claim template and its retention, resources, the config hash.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { StatefulSet } from '@opkit/runtime';
import {
  ANNOTATION_CONFIG_HASH,
  type Database,
  type EngineName,
  LABEL_ROLE,
} from '../../src/api/v1/database.ts';
import {
  configHash,
  configMap,
  credentialsSecret,
  desiredChildren,
  statefulSet,
  withDefaults,
} from '../../src/controllers/database/desired/index.ts';
import { type Container, engineFor, requiredEnv } from '../../src/controllers/database/engines/index.ts';
import { allStrings, database, decoded, PASSWORD_KEYS } from './fixtures.ts';

const sts = (db: Database) => statefulSet(db, { configHash: configHash(configMap(db)) });
const podSpec = (s: StatefulSet) => {
  const p = s.spec?.template.spec;
  assert.ok(p);
  return p;
};
const allContainers = (s: StatefulSet): Container[] => [
  ...(podSpec(s).initContainers ?? []),
  ...podSpec(s).containers,
];
const main = (s: StatefulSet) => podSpec(s).containers[0] as Container;

const EXPECT = {
  postgres: {
    version: '16',
    image: 'postgres:16',
    port: 5432,
    container: 'postgres',
    mount: '/var/lib/postgresql/data',
    dataEnv: ['PGDATA', '/var/lib/postgresql/data/pgdata'],
  },
  mysql: {
    version: '8.4',
    image: 'mysql:8.4',
    port: 3306,
    container: 'mysql',
    mount: '/var/lib/mysql',
    dataEnv: ['MYSQL_DATADIR', '/var/lib/mysql/data'],
  },
} as const;

for (const engine of ['postgres', 'mysql'] as const satisfies readonly EngineName[]) {
  const x = EXPECT[engine];
  describe(`${engine} StatefulSet`, () => {
    test('name, labels, replicas, headless serviceName, ordered pods, rolling updates, no owner refs', () => {
      const s = sts(database(engine, { replicas: 3 }));
      assert.equal(s.apiVersion, 'apps/v1');
      assert.equal(s.kind, 'StatefulSet');
      assert.equal(s.metadata.name, 'orders');
      assert.equal(s.metadata.namespace, 'shop');
      assert.equal(s.metadata.ownerReferences, undefined);
      assert.equal(s.metadata.labels?.['app.kubernetes.io/managed-by'], 'opkit-database-operator');
      assert.equal(s.spec?.replicas, 3);
      assert.equal(s.spec?.serviceName, 'orders-headless');
      // postgres fails over: a lost pod 0 must not block replacing the others (OrderedReady would).
      assert.equal(s.spec?.podManagementPolicy, engine === 'postgres' ? 'Parallel' : 'OrderedReady');
      // postgres: the operator rolls the pods (replicas first, the primary last); mysql: the StatefulSet.
      assert.equal(s.spec?.updateStrategy?.type, engine === 'postgres' ? 'OnDelete' : 'RollingUpdate');
      // postgres: the pause process is PID 1 and reaps orphaned probe processes, not the postmaster.
      assert.equal(s.spec?.template.spec?.shareProcessNamespace, engine === 'postgres' ? true : undefined);
      assert.deepEqual(s.spec?.selector, {
        matchLabels: {
          'app.kubernetes.io/name': engine,
          'app.kubernetes.io/instance': 'orders',
          'app.kubernetes.io/managed-by': 'opkit-database-operator',
        },
      });
      const labels = s.spec?.template.metadata?.labels ?? {};
      for (const [k, v] of Object.entries(s.spec?.selector.matchLabels ?? {})) assert.equal(labels[k], v);
      assert.equal(labels['app.kubernetes.io/component'], 'database');
      // The role label is maintained on the pods by the operator, never in the template.
      assert.equal(labels[LABEL_ROLE], undefined);
    });

    test(`official image ${x.image}, port ${x.port}; spec.image overrides`, () => {
      const s = sts(database(engine, { version: x.version }));
      for (const c of allContainers(s)) assert.equal(c.image, x.image, c.name);
      const c = main(s);
      assert.equal(c.name, x.container);
      assert.deepEqual(c.ports, [{ name: x.container, containerPort: x.port, protocol: 'TCP' }]);
      const mirrored = sts(database(engine, { image: 'registry.local/db:pinned' }));
      for (const c2 of allContainers(mirrored)) assert.equal(c2.image, 'registry.local/db:pinned');
      assert.equal(engineFor(engine).image(x.version), x.image);
    });

    test('every credential comes from the Secret by secretKeyRef; no password anywhere in the StatefulSet', () => {
      const db = database(engine, { replicas: 3 });
      const secret = credentialsSecret(db);
      const values = decoded(secret);
      const s = sts(db);
      for (const c of allContainers(s)) {
        for (const e of c.env ?? []) {
          // postgres: no password in env (the node writes a container's env to disk, in its spec): files of
          // the Secret's volume instead (REPLICATION_PASSWORD_FILE). mysql: unchanged in issue 11.
          if (engine === 'postgres') {
            const key = e.valueFrom?.secretKeyRef?.key ?? '';
            assert.ok(
              !(PASSWORD_KEYS as readonly string[]).includes(key),
              `${c.name} ${e.name}: a password in env`,
            );
          }
          if (/PASSWORD_FILE$/.test(e.name)) {
            assert.match(e.value ?? '', /^\/etc\/opkit-credentials\//, `${c.name} ${e.name}`);
          } else if (/PASSWORD|USER$|DATABASE$/.test(e.name)) {
            assert.equal(e.value, undefined, `${c.name} ${e.name} is inline`);
            assert.equal(e.valueFrom?.secretKeyRef?.name, 'orders-credentials', `${c.name} ${e.name}`);
            assert.ok(e.valueFrom?.secretKeyRef?.key && e.valueFrom.secretKeyRef.key in values, e.name);
          }
        }
        assert.equal(c.envFrom, undefined);
      }
      const strings = allStrings(s);
      for (const key of PASSWORD_KEYS) {
        const pw = values[key] ?? '';
        assert.ok(!JSON.stringify(s).includes(pw), `${key} found in the StatefulSet`);
        assert.ok(!strings.some((str) => str.includes(pw)));
        assert.ok(!JSON.stringify(configMap(db)).includes(pw), `${key} found in the ConfigMap`);
      }
    });

    test('the containers provide every variable their scripts require', () => {
      const db = database(engine, { replicas: 2 });
      const data = configMap(db).data ?? {};
      const s = sts(db);
      const envOf = (c: Container) => (c.env ?? []).map((e) => e.name);
      // Which container runs which script: by its command, or by the initdb mount.
      for (const c of allContainers(s)) {
        const scripts = [...(c.command ?? []), ...(c.args ?? [])]
          .map((a) => a.split('/').pop() ?? '')
          .filter((f) => f.endsWith('.sh') && f in data);
        const initdb = (c.volumeMounts ?? []).some((m) => m.mountPath === '/docker-entrypoint-initdb.d');
        if (initdb) scripts.push(engine === 'mysql' ? 'init-users.sh' : 'primary-init.sh');
        for (const file of scripts) {
          for (const v of requiredEnv(data[file] ?? ''))
            assert.ok(envOf(c).includes(v), `${c.name}: ${file} needs ${v}`);
        }
      }
    });

    test('data in a subdirectory of the data volume', () => {
      const c = main(sts(database(engine)));
      const mount = c.volumeMounts?.find((m) => m.name === 'data');
      assert.equal(mount?.mountPath, x.mount);
      const [name, value] = x.dataEnv;
      const env = c.env?.find((e) => e.name === name);
      assert.equal(env?.value, value);
      assert.ok(
        value.startsWith(`${x.mount}/`),
        'the data directory is inside the mount, not the mount itself',
      );
      assert.deepEqual(engineFor(engine).layout(x.version), { mountPath: x.mount, dataDir: value });
    });

    test('restricted security: non-root 999, fsGroup 999, RuntimeDefault seccomp, no escalation, caps dropped', () => {
      const s = sts(database(engine));
      const pod = podSpec(s);
      assert.equal(pod.securityContext?.runAsNonRoot, true);
      assert.equal(pod.securityContext?.runAsUser, 999);
      assert.equal(pod.securityContext?.runAsGroup, 999);
      assert.equal(pod.securityContext?.fsGroup, 999);
      assert.deepEqual(pod.securityContext?.seccompProfile, { type: 'RuntimeDefault' });
      assert.equal(pod.automountServiceAccountToken, false);
      for (const c of allContainers(s)) {
        assert.equal(c.securityContext?.allowPrivilegeEscalation, false, c.name);
        assert.deepEqual(c.securityContext?.capabilities, { drop: ['ALL'] }, c.name);
        assert.equal(c.securityContext?.runAsNonRoot, true, c.name);
        assert.equal(c.securityContext?.runAsUser, 999, c.name);
        assert.equal(c.securityContext?.privileged, undefined, c.name);
      }
    });

    test("PID 1 is the pod's pause process, not the engine: orphans of timed-out exec probes are reaped there", () => {
      // As PID 1 the postmaster takes such an orphan's exit for a crashed backend and restarts (seen on real pods).
      // postgres only: the mysql pods are unchanged (they only run on simulated nodes here).
      assert.equal(
        podSpec(sts(database(engine))).shareProcessNamespace,
        engine === 'postgres' ? true : undefined,
      );
    });

    test('preferred anti-affinity on kubernetes.io/hostname', () => {
      const pod = podSpec(sts(database(engine)));
      const terms = pod.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution ?? [];
      assert.equal(terms.length, 1);
      assert.equal(terms[0]?.weight, 100);
      assert.equal(terms[0]?.podAffinityTerm.topologyKey, 'kubernetes.io/hostname');
      assert.deepEqual(terms[0]?.podAffinityTerm.labelSelector?.matchLabels, {
        'app.kubernetes.io/name': engine,
        'app.kubernetes.io/instance': 'orders',
        'app.kubernetes.io/managed-by': 'opkit-database-operator',
      });
      assert.equal(pod.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution, undefined);
    });

    test('volume claim template `data` of spec.storage; PVCs retained on scale-down and deletion', () => {
      const s = sts(database(engine, { storage: '25Gi', storageClassName: 'fast-ssd' }));
      const t = s.spec?.volumeClaimTemplates ?? [];
      assert.equal(t.length, 1);
      assert.equal(t[0]?.metadata?.name, 'data');
      assert.deepEqual(t[0]?.spec?.accessModes, ['ReadWriteOnce']);
      assert.deepEqual(t[0]?.spec?.resources?.requests, { storage: '25Gi' });
      assert.equal(t[0]?.spec?.storageClassName, 'fast-ssd');
      assert.deepEqual(s.spec?.persistentVolumeClaimRetentionPolicy, {
        whenScaled: 'Retain',
        whenDeleted: 'Retain',
      });
      const noClass = sts(database(engine));
      assert.equal(noClass.spec?.volumeClaimTemplates?.[0]?.spec?.storageClassName, undefined);
      const numeric = sts(database(engine, { storage: 1073741824 }));
      assert.deepEqual(numeric.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests, {
        storage: '1073741824',
      });
    });

    test('probes really test the engine', () => {
      const c = main(sts(database(engine)));
      const cmd = (p: Container['readinessProbe']) => (p?.exec?.command ?? []).join(' ');
      assert.ok(c.startupProbe && c.readinessProbe && c.livenessProbe);
      assert.ok((c.startupProbe.failureThreshold ?? 0) * (c.startupProbe.periodSeconds ?? 0) >= 600);
      if (engine === 'postgres') {
        // health.sh startup: pg_isready over TCP, or a replica stuck starting up (test/replication).
        assert.equal(cmd(c.startupProbe), 'sh /etc/opkit/health.sh startup');
        // health.sh: a replica is ready while it streams (test/replication runs it for real).
        assert.equal(cmd(c.readinessProbe), 'sh /etc/opkit/health.sh ready');
        assert.equal(cmd(c.livenessProbe), 'sh /etc/opkit/health.sh live');
        assert.match(
          c.lifecycle?.preStop?.exec?.command?.join(' ') ?? '',
          /pg_ctl stop -D "\$PGDATA" -m fast/,
        );
      } else {
        assert.equal(c.readinessProbe.exec?.command?.[0], 'sh');
        assert.match(
          cmd(c.readinessProbe),
          /mysql --protocol=TCP -h 127\.0\.0\.1 -P 3306 -uroot -p"\$MYSQL_ROOT_PASSWORD" -e 'SELECT 1'/,
        );
        assert.equal(cmd(c.startupProbe), cmd(c.readinessProbe));
        assert.doesNotMatch(cmd(c.readinessProbe), /mysqladmin/);
        // Liveness does not depend on credentials on purpose.
        assert.match(cmd(c.livenessProbe), /^mysqladmin --protocol=TCP -h 127\.0\.0\.1 -P 3306 ping$/);
      }
    });

    test('resources from spec; defaults when unset', () => {
      const given = main(
        sts(
          database(engine, {
            resources: { requests: { cpu: '500m', memory: 1073741824 }, limits: { memory: '2Gi' } },
          }),
        ),
      );
      assert.deepEqual(given.resources, {
        requests: { cpu: '500m', memory: '1073741824' },
        limits: { memory: '2Gi' },
      });
      assert.deepEqual(main(sts(database(engine))).resources, { requests: { cpu: '100m', memory: '256Mi' } });
    });

    test('the config hash annotation changes when the configuration does, and only then', () => {
      const a = sts(database(engine));
      const hashOf = (s: StatefulSet) => s.spec?.template.metadata?.annotations?.[ANNOTATION_CONFIG_HASH];
      assert.match(hashOf(a) ?? '', /^[0-9a-f]{32}$/);
      assert.equal(hashOf(sts(database(engine))), hashOf(a), 'stable across calls');
      assert.equal(
        hashOf(sts(database(engine, { replicas: 3 }))),
        hashOf(a),
        'scaling is not a config change',
      );
      assert.notEqual(hashOf(sts(database(engine, { parameters: { max_connections: '500' } }))), hashOf(a));
      assert.equal(
        hashOf(sts(database(engine, { storage: '500Gi' }))),
        hashOf(a),
        'growing storage restarts nothing',
      );
      assert.notEqual(hashOf(sts(database(engine, { resources: { limits: { memory: '4Gi' } } }))), hashOf(a));
    });

    test('podLabels and podAnnotations reach the pods; the operator labels win', () => {
      const s = sts(
        database(engine, {
          podLabels: { team: 'payments', 'app.kubernetes.io/instance': 'hijack' },
          podAnnotations: { 'prometheus.io/scrape': 'true', [ANNOTATION_CONFIG_HASH]: 'nope' },
        }),
      );
      const meta = s.spec?.template.metadata;
      assert.equal(meta?.labels?.team, 'payments');
      assert.equal(meta?.labels?.['app.kubernetes.io/instance'], 'orders');
      assert.equal(meta?.annotations?.['prometheus.io/scrape'], 'true');
      assert.notEqual(meta?.annotations?.[ANNOTATION_CONFIG_HASH], 'nope');
    });

    test('nodeSelector, tolerations and priorityClassName reach the pod spec', () => {
      const pod = podSpec(
        sts(
          database(engine, {
            nodeSelector: { disktype: 'ssd' },
            tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'db', effect: 'NoSchedule' }],
            priorityClassName: 'databases',
          }),
        ),
      );
      assert.deepEqual(pod.nodeSelector, { disktype: 'ssd' });
      assert.deepEqual(pod.tolerations, [
        { key: 'dedicated', operator: 'Equal', value: 'db', effect: 'NoSchedule' },
      ]);
      assert.equal(pod.priorityClassName, 'databases');
      const plain = podSpec(sts(database(engine)));
      assert.equal(plain.nodeSelector, undefined);
      assert.equal(plain.tolerations, undefined);
    });

    test('the ConfigMap volumes mount the rendered files', () => {
      const db = database(engine);
      const pod = podSpec(sts(db));
      const keys = Object.keys(configMap(db).data ?? {});
      for (const v of pod.volumes ?? []) {
        if (!v.configMap) continue;
        assert.equal(v.configMap.name, 'orders-config');
        for (const item of v.configMap.items ?? []) assert.ok(keys.includes(item.key), item.key);
      }
      if (engine === 'mysql') {
        const initdb = pod.volumes?.find((v) => v.name === 'initdb');
        assert.equal(initdb?.configMap?.items?.[0]?.mode, 0o555, 'the init script is executed, not sourced');
      }
    });
  });
}

describe('engine specifics', () => {
  test("postgres: the operator's instance.sh bootstraps every pod; the primary and identity come from the ConfigMap", () => {
    const s = sts(database('postgres', { replicas: 3 }));
    const init = podSpec(s).initContainers ?? [];
    assert.deepEqual(
      init.map((c) => c.name),
      ['bootstrap'],
    );
    for (const c of [init[0], main(s)]) {
      const env = Object.fromEntries((c?.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]));
      // Read when each container starts: a new record reaches the pods without a roll.
      assert.deepEqual(env.PRIMARY_POD, {
        configMapKeyRef: { name: 'orders-config', key: 'cluster-primary' },
      });
      assert.deepEqual(env.CLUSTER_SYSTEM_ID, {
        configMapKeyRef: { name: 'orders-config', key: 'cluster-system-identifier' },
      });
      assert.equal(env.PRIMARY_HOST, '$(PRIMARY_POD).orders-headless');
      assert.equal(env.PRIMARY_PORT, '5432');
      assert.equal(env.PASSFILE, '/run/opkit/pgpass');
      assert.deepEqual(env.POD_NAME, { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } });
      // Defined before PRIMARY_HOST, which refers to it.
      const names = (c?.env ?? []).map((e) => e.name);
      assert.ok(names.indexOf('PRIMARY_POD') < names.indexOf('PRIMARY_HOST'));
    }
    assert.deepEqual(init[0]?.command, ['sh', '/etc/opkit/instance.sh', 'bootstrap']);
    assert.deepEqual(main(s).command, ['sh', '/etc/opkit/instance.sh', 'start']);
    assert.equal(main(s).args, undefined);
    // The credentials sidecar: the Secret's verifiers and replication password only, read-only.
    const sidecar = podSpec(s).containers.find((c) => c.name === 'credentials');
    assert.deepEqual(sidecar?.command, [
      'sh',
      '-c',
      'sh /etc/opkit/lease.sh & exec sh /etc/opkit/credentials.sh',
    ]);
    // The primary lease: the instances' ServiceAccount, its token in the sidecar only (projected), none
    // in the server's container and no automounted one.
    const spec = podSpec(s);
    assert.equal(spec.serviceAccountName, 'orders-instance');
    assert.equal(spec.automountServiceAccountToken, false);
    const token = spec.volumes?.find((v) => v.name === 'lease-token')?.projected;
    assert.deepEqual(token?.sources?.[0]?.serviceAccountToken, { path: 'token', expirationSeconds: 3600 });
    assert.deepEqual(token?.sources?.[1]?.configMap?.name, 'kube-root-ca.crt');
    const mounting = [...(spec.initContainers ?? []), ...spec.containers]
      .filter((c) => c.volumeMounts?.some((m) => m.name === 'lease-token'))
      .map((c) => c.name);
    assert.deepEqual(mounting, ['credentials']);
    const sidecarEnv = Object.fromEntries((sidecar?.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]));
    assert.equal(sidecarEnv.LEASE_NAME, 'orders-primary');
    assert.equal(sidecarEnv.LEASE_SECONDS, '15');
    const secretVolume = podSpec(s).volumes?.find((v) => v.name === 'credentials')?.secret;
    assert.equal(secretVolume?.secretName, 'orders-credentials');
    assert.deepEqual(secretVolume?.items?.map((i) => i.key).sort(), [
      'app-password-scram',
      'app-username',
      'replication-password',
      'replication-password-scram',
      'replication-username',
    ]);
    const run = podSpec(s).volumes?.find((v) => v.name === 'run');
    assert.equal(run?.emptyDir?.medium, 'Memory', 'the passfile is never on a disk');
    assert.equal(podSpec(s).terminationGracePeriodSeconds, 60);
  });

  test('postgres: a new cluster record changes the ConfigMap but not the config hash (no roll)', () => {
    const db = database('postgres', { replicas: 3 });
    const fresh = configMap(db);
    const recorded = configMap(db, { primary: 'orders-2', systemIdentifier: '7312345678901234567' });
    assert.equal(fresh.data?.['cluster-primary'], 'orders-0');
    assert.equal(fresh.data?.['cluster-system-identifier'], '');
    assert.equal(recorded.data?.['cluster-primary'], 'orders-2');
    assert.equal(recorded.data?.['cluster-system-identifier'], '7312345678901234567');
    assert.equal(configHash(recorded), configHash(fresh));
    assert.notEqual(configHash({ data: { ...fresh.data, 'health.sh': 'changed' } }), configHash(fresh));
  });

  test('postgres 18+ keeps data in /var/lib/postgresql/<major>/docker with the mount at /var/lib/postgresql', () => {
    const pg = engineFor('postgres');
    assert.deepEqual(pg.layout('18'), {
      mountPath: '/var/lib/postgresql',
      dataDir: '/var/lib/postgresql/18/docker',
    });
    assert.deepEqual(pg.layout('17'), {
      mountPath: '/var/lib/postgresql/data',
      dataDir: '/var/lib/postgresql/data/pgdata',
    });
    assert.equal(pg.image('14'), 'postgres:14');
  });

  test('mysql: start script, replication sidecar from <name>-0.<name>-headless, my.cnf in conf.d', () => {
    const s = sts(database('mysql', { replicas: 3 }));
    const pod = podSpec(s);
    assert.deepEqual(pod.initContainers, []);
    assert.deepEqual(
      pod.containers.map((c) => c.name),
      ['mysql', 'replication'],
    );
    assert.deepEqual(main(s).command, ['sh', '/etc/opkit/start.sh']);
    const agent = pod.containers[1];
    assert.deepEqual(agent?.command, ['sh', '/etc/opkit/replication-agent.sh']);
    const env = Object.fromEntries((agent?.env ?? []).map((e) => [e.name, e.value]));
    assert.equal(env.SOURCE_HOST, 'orders-0.orders-headless');
    assert.equal(env.SOURCE_PORT, '3306');
    assert.equal(env.PRIMARY_POD, 'orders-0');
    const cnf = main(s).volumeMounts?.find((m) => m.mountPath === '/etc/mysql/conf.d/opkit.cnf');
    assert.equal(cnf?.subPath, 'my.cnf');
    const skipTz = main(s).env?.find((e) => e.name === 'MYSQL_INITDB_SKIP_TZINFO');
    assert.equal(skipTz?.value, '1');
    assert.equal(engineFor('mysql').image('8.0'), 'mysql:8.0');
  });

  test('desiredChildren bundles everything with the same hash', () => {
    const db = database('postgres', { replicas: 2 });
    const c = desiredChildren(db);
    assert.equal(c.configHash, configHash(c.configMap));
    assert.equal(c.statefulSet.spec?.template.metadata?.annotations?.[ANNOTATION_CONFIG_HASH], c.configHash);
    assert.equal(
      c.selector,
      'app.kubernetes.io/instance=orders,app.kubernetes.io/managed-by=opkit-database-operator,app.kubernetes.io/name=postgres',
    );
  });
});

describe('withDefaults', () => {
  test('a raw Database: a defaulted copy, the input untouched; a Database it returned: that one, not copied again', () => {
    const raw = database('postgres');
    delete (raw.spec as Partial<Database['spec']>).deletionPolicy;
    const d = withDefaults(raw);
    assert.notEqual(d, raw);
    assert.equal(raw.spec.deletionPolicy, undefined);
    assert.equal(d.spec.deletionPolicy, 'Retain');
    assert.equal(withDefaults(d), d);
    // The builders give the same children from either.
    assert.deepEqual(sts(d), sts(raw));
    assert.deepEqual(credentialsSecret(d)?.metadata, credentialsSecret(raw)?.metadata);
  });
});
