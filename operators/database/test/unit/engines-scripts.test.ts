/**
 * The scripts the pods run, executed by a real POSIX shell (dash when installed) against stand-ins for
 * the engine's tools (mysql, docker-entrypoint.sh) that record what they were asked. This checks the shell logic, the SQL the scripts send, their idempotence and that no
 * password is ever in a process's arguments. MySQL itself cannot run on this machine (Debian ships
 * MariaDB, whose GTIDs are a different implementation), so the MySQL scripts are checked this way only;
 * the postgres scripts run against real postgres in test/replication (only their syntax is checked here).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { configMap } from '../../src/controllers/database/desired/index.ts';
import {
  credentialsScript,
  healthScript,
  initUsersScript,
  instanceScript,
  MYSQL_FILES,
  POSTGRES_FILES,
  replicationAgentScript,
  requiredEnv,
  startScript,
} from '../../src/controllers/database/engines/index.ts';
import { database } from './fixtures.ts';

const SH = existsSync('/bin/dash') ? '/bin/dash' : '/bin/sh';
let tmp = '';
let bin = '';
let log = '';

/** Writes an executable stand-in for a tool. */
function fake(name: string, body: string): void {
  writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
}

function runScript(script: string, env: Record<string, string>) {
  const file = join(tmp, 'script.sh');
  writeFileSync(file, script);
  writeFileSync(log, '');
  const r = spawnSync(SH, [file], {
    env: { PATH: `${bin}:/usr/bin:/bin`, FAKE_LOG: log, TMPDIR: tmp, ...env },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, log: readFileSync(log, 'utf8') };
}

/** Lines of the stand-ins' log with a given prefix. */
const entries = (text: string, prefix: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith(`${prefix} `))
    .map((l) => l.slice(prefix.length + 1));

before(() => {
  tmp = mkdtempSync(join(tmpdir(), 'opkit-scripts-'));
  bin = join(tmp, 'bin');
  mkdirSync(bin);
  log = join(tmp, 'calls.log');
  // mysql: logs its arguments, the option file it was given and each statement; answers the agent's
  // queries from FAKE_* variables; FAKE_DOWN makes every connection fail.
  fake(
    'mysql',
    `printf 'ARGS %s\\n' "$*" >>"$FAKE_LOG"
for a in "$@"; do
  case "$a" in --defaults-extra-file=*) printf 'CNF %s\\n' "$(tr '\\n' '|' <"\${a#*=}")" >>"$FAKE_LOG" ;; esac
done
if [ -n "\${FAKE_DOWN:-}" ]; then echo "ERROR 2003: Can't connect" >&2; exit 1; fi
input=$(cat)
printf '%s\\n' "$input" | while IFS= read -r line; do printf 'SQL %s\\n' "$line" >>"$FAKE_LOG"; done
case "$input" in
  'SELECT 1') echo 1 ;;
  'SELECT @@GLOBAL.super_read_only') echo "\${FAKE_RO:-0}" ;;
  *replication_connection_configuration*) [ -n "\${FAKE_CONFIG:-}" ] && echo "$FAKE_CONFIG" ;;
  *LAST_ERROR_NUMBER*) [ -n "\${FAKE_ERRORS:-}" ] && echo "$FAKE_ERRORS" ;;
  *replication_applier_status*) echo "\${FAKE_STATE:-ON ON}" ;;
esac
exit 0`,
  );
  fake('docker-entrypoint.sh', `for a in "$@"; do printf 'ARG %s\\n' "$a"; done`);
});

after(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('every script', () => {
  const scripts: Record<string, string> = {
    ...Object.fromEntries(
      Object.entries(configMap(database('postgres')).data ?? {}).map(([k, v]) => [`postgres/${k}`, v]),
    ),
    ...Object.fromEntries(
      Object.entries(configMap(database('mysql')).data ?? {}).map(([k, v]) => [`mysql/${k}`, v]),
    ),
  };
  const shells = Object.entries(scripts).filter(([k]) => k.endsWith('.sh'));

  test('there are the expected scripts, each a POSIX sh script', () => {
    assert.deepEqual(shells.map(([k]) => k).sort(), [
      'mysql/init-users.sh',
      'mysql/replication-agent.sh',
      'mysql/start.sh',
      'postgres/credentials.sh',
      'postgres/health.sh',
      'postgres/instance.sh',
      'postgres/lease.sh',
    ]);
    for (const [name, text] of shells) {
      assert.ok(text.startsWith('#!/bin/sh\n'), name);
      assert.doesNotMatch(
        text,
        /\[\[|\bfunction\b|\blocal\b|<<<|\$\{[A-Za-z_]+\/\//,
        `${name} uses a bashism`,
      );
    }
  });

  test('each parses with dash -n (and passes shellcheck when installed)', () => {
    const shellcheck = spawnSync('shellcheck', ['--version']).status === 0;
    for (const [name, text] of shells) {
      const file = join(tmp, name.replace('/', '-'));
      writeFileSync(file, text);
      const parsed = spawnSync(SH, ['-n', file], { encoding: 'utf8' });
      assert.equal(parsed.status, 0, `${name}: ${parsed.stderr}`);
      if (shellcheck) {
        const r = spawnSync('shellcheck', ['-s', 'sh', '-S', 'info', file], { encoding: 'utf8' });
        assert.equal(r.status, 0, `${name}:\n${r.stdout}`);
      }
    }
  });

  test('each refuses to run without the variables it requires', () => {
    for (const [name, text] of shells) {
      const required = requiredEnv(text);
      assert.ok(required.length > 0, name);
      const r = runScript(text, {});
      assert.notEqual(r.code, 0, name);
      assert.match(r.stderr, new RegExp(`(${required.join('|')}).*(not set|null)`), name);
    }
  });
});

const MYSQL_ENV = {
  MYSQL_ROOT_PASSWORD: 'root"pw\\x',
  APP_DATABASE: 'my_db',
  APP_USER: 'app',
  APP_PASSWORD: "app'pw",
  REPLICATION_USER: 'replicator',
  REPLICATION_PASSWORD: "r'e\\pl",
  POD_NAME: 'orders-1',
  PRIMARY_POD: 'orders-0',
  SOURCE_HOST: 'orders-0.orders-headless',
  SOURCE_PORT: '3306',
  MYSQL_PORT: '3306',
  HEADLESS_SERVICE: 'orders-headless',
  MYSQL_DATADIR: '/var/lib/mysql/data',
};
const noPasswordInArgs = (text: string) => {
  for (const args of [...entries(text, 'ARGS'), ...entries(text, 'BASEBACKUP'), ...entries(text, 'PSQL')]) {
    for (const pw of ['root"pw', "app'pw", "r'e", 'secret-repl', 'secret-app'])
      assert.ok(!args.includes(pw), args);
  }
};

describe('mysql start.sh', () => {
  test('server_id from the pod ordinal, report_host its DNS name, data subdirectory, via the entrypoint', () => {
    const r = runScript(startScript(), { ...MYSQL_ENV, POD_NAME: 'orders-2' });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(entries(r.stdout, 'ARG'), [
      'mysqld',
      '--datadir=/var/lib/mysql/data',
      '--server-id=102',
      '--report-host=orders-2.orders-headless',
      '--report-port=3306',
    ]);
    const first = runScript(startScript(), { ...MYSQL_ENV, POD_NAME: 'orders-0' });
    assert.ok(entries(first.stdout, 'ARG').includes('--server-id=100'));
  });

  test('a pod name without an ordinal is an error', () => {
    const r = runScript(startScript(), { ...MYSQL_ENV, POD_NAME: 'orders' });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /cannot read the pod ordinal/);
  });
});

describe('mysql init-users.sh', () => {
  test('users created unlogged (sql_log_bin=0), quoted; the replica persists super_read_only', () => {
    const r = runScript(initUsersScript(), MYSQL_ENV);
    assert.equal(r.code, 0, r.stderr);
    const sql = entries(r.log, 'SQL');
    assert.equal(sql[0], 'SET SESSION sql_log_bin = 0;');
    assert.deepEqual(sql.slice(1), [
      'CREATE DATABASE IF NOT EXISTS `my_db`;',
      "CREATE USER IF NOT EXISTS 'app'@'%' IDENTIFIED BY 'app''pw';",
      "ALTER USER 'app'@'%' IDENTIFIED BY 'app''pw';",
      "GRANT ALL PRIVILEGES ON `my\\_db`.* TO 'app'@'%';",
      "CREATE USER IF NOT EXISTS 'replicator'@'%' IDENTIFIED BY 'r''e\\\\pl';",
      "ALTER USER 'replicator'@'%' IDENTIFIED BY 'r''e\\\\pl';",
      "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'replicator'@'%';",
      'SET PERSIST super_read_only = ON;',
    ]);
    const args = entries(r.log, 'ARGS');
    assert.equal(args.length, 1);
    assert.match(
      args[0] ?? '',
      /^--defaults-extra-file=\S+ --protocol=socket --socket=\/var\/run\/mysqld\/mysqld\.sock$/,
    );
    assert.deepEqual(entries(r.log, 'CNF'), ['[client]|user=root|password="root\\"pw\\\\x"|']);
    noPasswordInArgs(r.log);
  });

  test('the primary stays writable', () => {
    const r = runScript(initUsersScript(), { ...MYSQL_ENV, POD_NAME: 'orders-0' });
    assert.equal(r.code, 0, r.stderr);
    assert.ok(!r.log.includes('super_read_only'));
  });

  test('the root password file does not outlive the script', () => {
    runScript(initUsersScript(), MYSQL_ENV);
    const leftovers = spawnSync('find', [tmp, '-maxdepth', '1', '-name', 'tmp.*'], {
      encoding: 'utf8',
    }).stdout.trim();
    assert.equal(leftovers, '');
  });
});

describe('mysql replication-agent.sh', () => {
  const agent = (env: Record<string, string>) =>
    runScript(replicationAgentScript(), { ...MYSQL_ENV, AGENT_ONCE: '1', ...env });
  const writes = (text: string) =>
    entries(text, 'SQL').filter((s) => !s.startsWith('SELECT') && !s.startsWith('  ') && s !== '');
  const CONFIGURED = 'orders-0.orders-headless 3306 replicator 1';

  test('a fresh replica: read-only, then CHANGE REPLICATION SOURCE with GTID auto-positioning and START REPLICA', () => {
    const r = agent({ FAKE_RO: '0', FAKE_CONFIG: '' });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(
      writes(r.log),
      [
        'SET PERSIST super_read_only = ON',
        "CHANGE REPLICATION SOURCE TO SOURCE_HOST = 'orders-0.orders-headless', SOURCE_PORT = 3306, SOURCE_USER = 'replicator', SOURCE_PASSWORD = 'r''e\\\\pl', SOURCE_AUTO_POSITION = 1, GET_SOURCE_PUBLIC_KEY = 1, SOURCE_CONNECT_RETRY = 10; START REPLICA;",
      ].map((s) => (s.startsWith('CHANGE') ? ` ${s}` : s)),
    );
    assert.match(r.stderr, /replicating from orders-0\.orders-headless:3306 \(was: not configured\)/);
    for (const args of entries(r.log, 'ARGS')) {
      assert.match(args, /^--defaults-extra-file=\S+ --protocol=TCP -h 127\.0\.0\.1 -P 3306 -N -B$/);
    }
    noPasswordInArgs(r.log);
  });

  test('idempotent: a replica already replicating gets no writes at all', () => {
    const r = agent({ FAKE_RO: '1', FAKE_CONFIG: CONFIGURED, FAKE_STATE: 'ON ON' });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(writes(r.log), []);
    const connecting = agent({ FAKE_RO: '1', FAKE_CONFIG: CONFIGURED, FAKE_STATE: 'CONNECTING ON' });
    assert.deepEqual(writes(connecting.log), []);
  });

  test('a stopped connection is started again, with the last error logged', () => {
    const r = agent({
      FAKE_RO: '1',
      FAKE_CONFIG: CONFIGURED,
      FAKE_STATE: 'OFF ON',
      FAKE_ERRORS: '2003: cannot connect',
    });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(writes(r.log), ['START REPLICA']);
    assert.match(r.stderr, /replication is 'OFF ON' \(last error: 2003: cannot connect\): starting it/);
  });

  test('replication from another source is stopped and pointed at the primary', () => {
    const r = agent({ FAKE_RO: '1', FAKE_CONFIG: 'somewhere-else 3306 replicator 1' });
    const w = writes(r.log);
    assert.equal(w.length, 1);
    assert.match(
      w[0] ?? '',
      /^STOP REPLICA; CHANGE REPLICATION SOURCE TO SOURCE_HOST = 'orders-0\.orders-headless'/,
    );
  });

  test('the primary is left alone', () => {
    const r = agent({ POD_NAME: 'orders-0', FAKE_RO: '0', FAKE_CONFIG: '' });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(entries(r.log, 'SQL'), []);
  });

  test('nothing is attempted while the server is not answering', () => {
    const r = agent({ FAKE_DOWN: '1' });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(entries(r.log, 'SQL'), []);
  });

  test('it exits promptly on SIGTERM', () => {
    const file = join(tmp, 'agent.sh');
    writeFileSync(file, replicationAgentScript());
    const started = Date.now();
    const r = spawnSync(SH, ['-c', `${SH} ${file} & pid=$!; sleep 0.5; kill -TERM $pid; wait $pid`], {
      env: {
        PATH: `${bin}:/usr/bin:/bin`,
        FAKE_LOG: log,
        TMPDIR: tmp,
        ...MYSQL_ENV,
        AGENT_INTERVAL: '30',
        FAKE_DOWN: '1',
      },
      encoding: 'utf8',
      timeout: 10_000,
    });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(Date.now() - started < 5000);
  });
});

describe('the ConfigMap', () => {
  test('the ConfigMap carries exactly these scripts', () => {
    const pg = configMap(database('postgres')).data ?? {};
    assert.equal(pg[POSTGRES_FILES.instance], instanceScript());
    assert.equal(pg[POSTGRES_FILES.health], healthScript());
    assert.equal(pg[POSTGRES_FILES.credentials], credentialsScript());
    const my = configMap(database('mysql')).data ?? {};
    assert.equal(my[MYSQL_FILES.start], startScript());
    assert.equal(my[MYSQL_FILES.initUsers], initUsersScript());
    assert.equal(my[MYSQL_FILES.agent], replicationAgentScript());
  });
});
