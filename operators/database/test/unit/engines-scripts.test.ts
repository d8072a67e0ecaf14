/**
 * The scripts the pods run, executed by a real POSIX shell (dash when installed) against stand-ins for
 * the engine's tools (mysql, docker-entrypoint.sh, pg_isready, pg_basebackup, psql) that record what they
 * were asked. This checks the shell logic, the SQL the scripts send, their idempotence and that no
 * password is ever in a process's arguments. MySQL itself cannot run on this machine (Debian ships
 * MariaDB, whose GTIDs are a different implementation), so the MySQL scripts are checked this way only;
 * the postgres scripts also run against real postgres in test/replication.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { configMap } from '../../src/controllers/database/desired/index.ts';
import {
  initUsersScript,
  MYSQL_FILES,
  POSTGRES_FILES,
  primaryInitScript,
  replicaBootstrapScript,
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
  fake('pg_isready', `printf 'ISREADY %s\\n' "$*" >>"$FAKE_LOG"; exit "\${FAKE_READY:-0}"`);
  // pg_basebackup: logs its arguments and whether it got the password by env; makes a data directory.
  fake(
    'pg_basebackup',
    `printf 'BASEBACKUP %s\\n' "$*" >>"$FAKE_LOG"
printf 'PGPASSWORD %s\\n' "\${PGPASSWORD:-}" >>"$FAKE_LOG"
if [ -n "\${FAKE_FAIL:-}" ]; then exit 1; fi
for a in "$@"; do case "$a" in --pgdata=*) dir=\${a#*=} ;; esac; done
mkdir -p "$dir" && echo 16 >"$dir/PG_VERSION" && : >"$dir/standby.signal"`,
  );
  fake(
    'psql',
    `printf 'PSQL %s\\n' "$*" >>"$FAKE_LOG"; cat | while IFS= read -r l; do printf 'STDIN %s\\n' "$l" >>"$FAKE_LOG"; done`,
  );
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
      'postgres/primary-init.sh',
      'postgres/replica-bootstrap.sh',
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

describe('postgres replica-bootstrap.sh (stand-in tools; the real run is in test/replication)', () => {
  const pgEnv = (pgdata: string) => ({
    PGDATA: pgdata,
    POD_NAME: 'orders-1',
    PRIMARY_POD: 'orders-0',
    PRIMARY_HOST: 'orders-0.orders-headless',
    PRIMARY_PORT: '5432',
    REPLICATION_USER: 'replicator',
    REPLICATION_PASSWORD: 'secret-repl',
  });

  test('clones into a sibling directory with -R and moves it into place; the password only by env', () => {
    const pgdata = join(tmp, 'pg1', 'data', 'pgdata');
    mkdirSync(join(tmp, 'pg1', 'data'), { recursive: true });
    const r = runScript(replicaBootstrapScript(), pgEnv(pgdata));
    assert.equal(r.code, 0, r.stderr);
    const [args] = entries(r.log, 'BASEBACKUP');
    assert.equal(
      args,
      `--pgdata=${pgdata}.partial --write-recovery-conf --wal-method=stream --checkpoint=fast --no-password ` +
        '--dbname=host=orders-0.orders-headless port=5432 user=replicator application_name=orders-1',
    );
    assert.deepEqual(entries(r.log, 'PGPASSWORD'), ['secret-repl']);
    assert.ok(existsSync(join(pgdata, 'PG_VERSION')));
    assert.equal(existsSync(`${pgdata}.partial`), false);
    assert.equal(statSync(pgdata).mode & 0o777, 0o700);
    noPasswordInArgs(r.log);
  });

  test('replaces an uninitialized directory and a leftover partial copy', () => {
    const pgdata = join(tmp, 'pg2', 'pgdata');
    mkdirSync(pgdata, { recursive: true });
    writeFileSync(join(pgdata, 'junk'), 'x');
    mkdirSync(`${pgdata}.partial`);
    writeFileSync(join(`${pgdata}.partial`, 'half'), 'x');
    const r = runScript(replicaBootstrapScript(), pgEnv(pgdata));
    assert.equal(r.code, 0, r.stderr);
    assert.equal(existsSync(join(pgdata, 'junk')), false);
    assert.ok(existsSync(join(pgdata, 'PG_VERSION')));
  });

  test('a failed copy leaves no data directory that looks initialized', () => {
    const pgdata = join(tmp, 'pg3', 'pgdata');
    const r = runScript(replicaBootstrapScript(), { ...pgEnv(pgdata), FAKE_FAIL: '1' });
    assert.notEqual(r.code, 0);
    assert.equal(existsSync(join(pgdata, 'PG_VERSION')), false);
  });

  test('does nothing on the primary or on an initialized replica', () => {
    const pgdata = join(tmp, 'pg4', 'pgdata');
    const primary = runScript(replicaBootstrapScript(), { ...pgEnv(pgdata), POD_NAME: 'orders-0' });
    assert.equal(primary.code, 0);
    assert.equal(entries(primary.log, 'BASEBACKUP').length, 0);
    mkdirSync(pgdata, { recursive: true });
    writeFileSync(join(pgdata, 'PG_VERSION'), '16\n');
    const again = runScript(replicaBootstrapScript(), pgEnv(pgdata));
    assert.equal(again.code, 0);
    assert.equal(entries(again.log, 'BASEBACKUP').length, 0);
    assert.equal(entries(again.log, 'ISREADY').length, 0);
  });

  test('gives up after WAIT_SECONDS when the primary never becomes ready', () => {
    const r = runScript(replicaBootstrapScript(), {
      ...pgEnv(join(tmp, 'pg5')),
      FAKE_READY: '2',
      WAIT_SECONDS: '0',
    });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /not ready after 0s/);
    assert.equal(entries(r.log, 'BASEBACKUP').length, 0);
  });
});

describe('postgres primary-init.sh', () => {
  test('passwords reach psql through the environment, never its arguments', () => {
    const r = runScript(primaryInitScript(), {
      APP_USER: 'app',
      APP_PASSWORD: 'secret-app',
      APP_DATABASE: 'app',
      REPLICATION_USER: 'replicator',
      REPLICATION_PASSWORD: 'secret-repl',
    });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(entries(r.log, 'PSQL'), [
      '-v ON_ERROR_STOP=1 --no-psqlrc --no-password --username postgres --dbname postgres',
    ]);
    const stdin = entries(r.log, 'STDIN').join('\n');
    assert.match(stdin, /\\set app_password `printf '%s' "\$APP_PASSWORD"`/);
    assert.ok(!stdin.includes('secret-app'));
    assert.match(stdin, /ALTER ROLE %I WITH LOGIN REPLICATION/);
    noPasswordInArgs(r.log);
  });

  test('the ConfigMap carries exactly these scripts', () => {
    const pg = configMap(database('postgres')).data ?? {};
    assert.equal(pg[POSTGRES_FILES.primaryInit], primaryInitScript());
    assert.equal(pg[POSTGRES_FILES.replicaBootstrap], replicaBootstrapScript());
    const my = configMap(database('mysql')).data ?? {};
    assert.equal(my[MYSQL_FILES.start], startScript());
    assert.equal(my[MYSQL_FILES.initUsers], initUsersScript());
    assert.equal(my[MYSQL_FILES.agent], replicationAgentScript());
  });
});
