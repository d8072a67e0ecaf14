/**
 * The engine configuration the ConfigMap carries: postgresql.conf, pg_hba.conf and my.cnf, with
 * spec.parameters rendered safely and the operator's replication settings always winning.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CLUSTER_KEYS,
  configHash,
  configMap,
  withDefaults,
} from '../../src/controllers/database/desired/index.ts';
import {
  cnfValue,
  MYSQL_FILES,
  myCnf,
  POSTGRES_FILES,
  pgHbaConf,
  pgQuote,
  postgresConf,
} from '../../src/controllers/database/engines/index.ts';
import { database } from './fixtures.ts';

const settings = (text: string, sep = ' = ') =>
  text
    .split('\n')
    .filter((l) => l && !l.startsWith('#') && !l.startsWith('['))
    .map((l) => {
      const i = l.indexOf(sep);
      return [l.slice(0, i), l.slice(i + sep.length)] as const;
    });
/** The value a setting ends up with: the last occurrence wins in both file formats. */
const effective = (text: string, name: string) =>
  settings(text)
    .filter(([k]) => k.toLowerCase().replace(/-/g, '_') === name)
    .at(-1)?.[1];

describe('postgresql.conf', () => {
  test('replication settings, paths and the hba file', () => {
    const conf = postgresConf(withDefaults(database('postgres')));
    assert.equal(effective(conf, 'wal_level'), "'replica'");
    assert.equal(effective(conf, 'max_wal_senders'), "'10'");
    assert.equal(effective(conf, 'hot_standby'), "'on'");
    assert.equal(effective(conf, 'listen_addresses'), "'*'");
    assert.equal(effective(conf, 'port'), "'5432'");
    assert.equal(effective(conf, 'hba_file'), "'/etc/opkit/pg_hba.conf'");
    assert.equal(effective(conf, 'password_encryption'), "'scram-sha-256'");
    assert.equal(effective(conf, 'wal_keep_size'), "'128MB'");
    // Replication slots keep WAL for the replicas, bounded (spec.parameters may change the bound).
    assert.equal(effective(conf, 'max_slot_wal_keep_size'), "'1GB'");
    const tuned = postgresConf(
      withDefaults(database('postgres', { parameters: { max_slot_wal_keep_size: '256MB' } })),
    );
    assert.equal(effective(tuned, 'max_slot_wal_keep_size'), "'256MB'");
    assert.equal(effective(conf, 'shared_buffers'), undefined, 'the server default without a memory limit');
  });

  test('spec.parameters are rendered quoted and may override the defaults, never the managed settings', () => {
    const conf = postgresConf(
      withDefaults(
        database('postgres', {
          resources: { limits: { memory: '2Gi' } },
          parameters: {
            max_connections: '300',
            shared_buffers: '768MB',
            search_path: "'$user', public",
            WAL_LEVEL: 'minimal',
            port: '6543',
            bad: 'x\nport = 1',
            'not valid': '1',
          },
        }),
      ),
    );
    assert.equal(effective(conf, 'max_connections'), "'300'");
    assert.equal(
      effective(conf, 'shared_buffers'),
      "'768MB'",
      'the user value comes after the 512MB default',
    );
    assert.ok(conf.includes("shared_buffers = '512MB'"), 'a quarter of the memory limit by default');
    assert.equal(effective(conf, 'search_path'), "'''$user'', public'");
    assert.equal(effective(conf, 'wal_level'), "'replica'");
    assert.equal(effective(conf, 'port'), "'5432'");
    assert.ok(!conf.includes('minimal'));
    assert.ok(!conf.includes('6543'));
    assert.ok(!conf.includes('port = 1'), 'a value with a newline is dropped');
    assert.ok(!conf.includes('not valid'));
    // Nothing but settings and comments.
    for (const line of conf.split('\n')) assert.match(line, /^(|#.*|[A-Za-z_][A-Za-z0-9_.-]* = '.*')$/);
  });

  test('pgQuote escapes quotes and backslashes', () => {
    assert.equal(pgQuote("it's"), "'it''s'");
    assert.equal(pgQuote('a\\b'), "'a\\\\b'");
  });

  test('pg_hba.conf: the superuser only by the local socket, replication and the application user by SCRAM over TLS, nothing else', () => {
    const hba = pgHbaConf({ appUser: 'app', appDatabase: 'shop' });
    const rules = hba
      .split('\n')
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => l.split(/\s+/));
    assert.deepEqual(rules, [
      ['local', 'all', '"postgres"', 'peer'],
      ['host', 'all', '"postgres"', 'all', 'reject'],
      ['hostssl', 'replication', '"replicator"', 'all', 'scram-sha-256'],
      ['hostssl', 'postgres', '"replicator"', 'all', 'scram-sha-256'],
      ['local', '"shop"', '"app"', 'scram-sha-256'],
      ['hostssl', '"shop"', '"app"', 'all', 'scram-sha-256'],
      ['local', 'all', 'all', 'reject'],
      ['host', 'all', 'all', 'all', 'reject'],
    ]);
    assert.doesNotMatch(hba, /trust|md5|password\b/);
    assert.doesNotMatch(hba, /^host\s+all\s+all\s+all\s+scram/m);
    // Over TCP, only TLS lets anyone in: every accepting TCP rule is hostssl.
    assert.deepEqual(
      rules.filter((r) => r[0]?.startsWith('host') && r.at(-1) !== 'reject').map((r) => r[0]),
      ['hostssl', 'hostssl', 'hostssl'],
    );
    // The Database's names, taken literally.
    const cm = configMap(database('postgres', { username: 'all', databaseName: 'my"db' }));
    assert.match(cm.data?.['pg_hba.conf'] ?? '', /^hostssl\s+"my""db"\s+"all"\s+all\s+scram-sha-256$/m);
  });

  test('the ConfigMap carries the config files and scripts, and nothing secret', () => {
    const cm = configMap(database('postgres'));
    assert.equal(cm.metadata.name, 'orders-config');
    assert.deepEqual(
      Object.keys(cm.data ?? {}).sort(),
      [...Object.values(POSTGRES_FILES), ...Object.values(CLUSTER_KEYS)].sort(),
    );
    assert.equal(cm.metadata.labels?.['app.kubernetes.io/component'], 'config');
  });
});

describe('my.cnf', () => {
  test('GTID replication settings and the data subdirectory; server_id comes from the start script', () => {
    const cnf = myCnf(withDefaults(database('mysql')));
    assert.match(cnf, /^\[mysqld\]$/m);
    assert.equal(effective(cnf, 'gtid_mode'), 'ON');
    assert.equal(effective(cnf, 'enforce_gtid_consistency'), 'ON');
    assert.equal(effective(cnf, 'log_bin'), 'binlog');
    assert.equal(effective(cnf, 'binlog_format'), 'ROW');
    assert.equal(effective(cnf, 'log_replica_updates'), 'ON');
    assert.equal(effective(cnf, 'datadir'), '/var/lib/mysql/data');
    assert.equal(effective(cnf, 'port'), '3306');
    assert.equal(effective(cnf, 'server_id'), undefined);
    assert.equal(effective(cnf, 'innodb_buffer_pool_size'), undefined);
  });

  test('spec.parameters: rendered, quoted when needed, never overriding the managed settings', () => {
    const cnf = myCnf(
      withDefaults(
        database('mysql', {
          resources: { limits: { memory: '1Gi' } },
          parameters: {
            max_connections: '500',
            'sql-mode': 'STRICT_TRANS_TABLES,NO_ZERO_DATE',
            init_connect: 'SET NAMES utf8mb4 # with a comment',
            'Server-Id': '7',
            'gtid-mode': 'OFF',
            'skip-log-bin': 'ON',
            innodb_buffer_pool_size: '256M',
          },
        }),
      ),
    );
    assert.equal(effective(cnf, 'max_connections'), '500');
    assert.equal(effective(cnf, 'sql_mode'), 'STRICT_TRANS_TABLES,NO_ZERO_DATE');
    assert.equal(effective(cnf, 'init_connect'), '"SET NAMES utf8mb4 # with a comment"');
    assert.equal(effective(cnf, 'innodb_buffer_pool_size'), '256M');
    assert.ok(cnf.includes('innodb_buffer_pool_size = 512M'), 'half the memory limit by default');
    assert.equal(effective(cnf, 'server_id'), undefined);
    assert.equal(effective(cnf, 'gtid_mode'), 'ON');
    assert.ok(!cnf.includes('skip-log-bin'));
  });

  test('cnfValue quotes what an option file would misread', () => {
    assert.equal(cnfValue('ROW'), 'ROW');
    assert.equal(cnfValue('a b'), '"a b"');
    assert.equal(cnfValue('x"y\\z'), '"x\\"y\\\\z"');
  });

  test('the ConfigMap carries my.cnf and the scripts', () => {
    const cm = configMap(database('mysql'));
    assert.deepEqual(Object.keys(cm.data ?? {}).sort(), Object.values(MYSQL_FILES).sort());
  });
});

describe('configHash', () => {
  test('depends on keys and values only, not on their order, and separates them', () => {
    assert.equal(configHash({ data: { a: '1', b: '2' } }), configHash({ data: { b: '2', a: '1' } }));
    assert.notEqual(configHash({ data: { a: 'bc' } }), configHash({ data: { ab: 'c' } }));
    assert.notEqual(configHash({ data: { a: '1' } }), configHash({ data: { a: '2' } }));
    assert.match(configHash({}), /^[0-9a-f]{32}$/);
  });

  test('differs between engines and follows the parameters', () => {
    const pg = configHash(configMap(database('postgres')));
    assert.notEqual(pg, configHash(configMap(database('mysql'))));
    assert.notEqual(pg, configHash(configMap(database('postgres', { parameters: { work_mem: '8MB' } }))));
    assert.equal(pg, configHash(configMap(database('postgres', { replicas: 5 }))));
  });
});
