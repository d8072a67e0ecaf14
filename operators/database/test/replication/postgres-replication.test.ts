/**
 * PostgreSQL streaming replication with REAL postgres processes, wired exactly as the operator wires its
 * pods: the ConfigMap's postgresql.conf (rendered by the same function, with this machine's port, socket
 * directory and config directory instead of the pod's), its pg_hba.conf, its primary init script and its
 * replica bootstrap script (byte for byte), run with the environment the StatefulSet gives them (the
 * credentials from the Secret the operator generates), and the probe commands of the StatefulSet.
 *
 * What the official image's entrypoint does around them is done here by hand: initdb on the primary,
 * then the init script against the running primary; the main containers' `postgres -c config_file=...`
 * is `pg_ctl start -o '-c config_file=...'`.
 *
 * Needs the PostgreSQL server binaries (Debian: apt-get install postgresql). Postgres refuses to run as
 * root: as root, every process runs as the `postgres` OS user the package creates.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Database } from '../../src/api/v1/database.ts';
import {
  configHash,
  configMap,
  credentialsSecret,
  SECRET_KEYS,
  statefulSet,
  withDefaults,
} from '../../src/controllers/database/desired/index.ts';
import {
  POSTGRES_FILES,
  type PostgresPaths,
  postgresConf,
  postgresPreStopCommand,
  postgresProbeCommands,
  requiredEnv,
} from '../../src/controllers/database/engines/index.ts';

/** The newest installed PostgreSQL with the tools the pods use. */
function findPgBin(): string | undefined {
  if (process.env.OPKIT_PG_BIN) return process.env.OPKIT_PG_BIN;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const majors = readdirSync(root)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  for (const m of majors) {
    const bin = join(root, m, 'bin');
    if (
      ['initdb', 'pg_ctl', 'postgres', 'pg_basebackup', 'pg_isready', 'psql'].every((t) =>
        existsSync(join(bin, t)),
      )
    ) {
      return bin;
    }
  }
  return undefined;
}

const PG_BIN = findPgBin();
const isRoot = process.getuid?.() === 0;
/** As root, run everything as the `postgres` OS user (postgres refuses root; peer auth maps it to the superuser). */
function postgresIds(): { uid: number; gid: number } | undefined {
  if (!isRoot) return undefined;
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) return undefined;
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}
const IDS = postgresIds();
const osUser = isRoot ? 'postgres' : (process.env.USER ?? '');
const skipReason = !PG_BIN
  ? 'PostgreSQL server binaries not found (apt-get install postgresql)'
  : isRoot && !IDS
    ? 'running as root but there is no postgres OS user (apt-get install postgresql creates it)'
    : !isRoot && osUser !== 'postgres'
      ? 'run as root or as the postgres OS user (peer authentication maps that user to the superuser)'
      : undefined;
if (skipReason && process.env.CI) throw new Error(`replication test cannot run in CI: ${skipReason}`);

const NAME = 'orders';
const majorVersion = PG_BIN ? (PG_BIN.split('/').at(-2) ?? '16') : '16';
const db: Database = {
  apiVersion: 'myapp.example.com/v1',
  kind: 'Database',
  metadata: { name: NAME, namespace: 'shop' },
  spec: {
    engine: 'postgres',
    version: ['14', '15', '16', '17'].includes(majorVersion) ? majorVersion : '16',
    storage: '1Gi',
    replicas: 2,
  },
};

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface Instance {
  pod: string;
  port: number;
  root: string;
  pgdata: string;
  configDir: string;
  socketDir: string;
  paths: PostgresPaths;
  log: string;
}

let tmp = '';
let secret: Record<string, string> = {};
let primary: Instance;
let replica: Instance;
const started: Instance[] = [];

function run(cmd: string, args: string[], env: Record<string, string> = {}, input = ''): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      env: { PATH: `${PG_BIN}:/usr/local/bin:/usr/bin:/bin`, HOME: tmp, LC_ALL: 'C', ...env },
      cwd: tmp,
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(IDS ?? {}),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    // A command that exits without reading its input must not fail the test with EPIPE.
    child.stdin.on('error', () => {});
    child.stdin.end(input);
  });
}

async function ok(
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
  input = '',
): Promise<string> {
  const r = await run(cmd, args, env, input);
  assert.equal(r.code, 0, `${cmd} ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function mkdirOwned(path: string): void {
  mkdirSync(path, { recursive: true, mode: 0o700 });
  if (IDS) chownSync(path, IDS.uid, IDS.gid);
}

function writeOwned(path: string, text: string, mode = 0o600): void {
  writeFileSync(path, text, { mode });
  if (IDS) chownSync(path, IDS.uid, IDS.gid);
}

async function instance(pod: string): Promise<Instance> {
  const root = join(tmp, pod);
  const port = await freePort();
  const inst: Instance = {
    pod,
    port,
    root,
    // Like the pod: the data directory is a subdirectory of the volume's mount.
    pgdata: join(root, 'data', 'pgdata'),
    configDir: join(root, 'config'),
    socketDir: join(root, 'run'),
    paths: {
      port,
      configDir: join(root, 'config'),
      socketDir: join(root, 'run'),
      listenAddresses: '127.0.0.1',
    },
    log: join(root, 'postgres.log'),
  };
  for (const dir of [root, join(root, 'data'), inst.configDir, inst.socketDir]) mkdirOwned(dir);
  // The ConfigMap's files, as mounted at /etc/opkit (postgresql.conf with this instance's port and paths).
  const data = configMap(db).data ?? {};
  writeOwned(join(inst.configDir, POSTGRES_FILES.conf), postgresConf(withDefaults(db), inst.paths), 0o444);
  writeOwned(join(inst.configDir, POSTGRES_FILES.hba), data[POSTGRES_FILES.hba] ?? '', 0o444);
  return inst;
}

/** The environment the StatefulSet gives the containers, with this machine's hosts and paths. */
function podEnv(inst: Instance): Record<string, string> {
  return {
    PGDATA: inst.pgdata,
    POD_NAME: inst.pod,
    PRIMARY_POD: primary.pod,
    PRIMARY_HOST: '127.0.0.1',
    PRIMARY_PORT: String(primary.port),
    POSTGRES_USER: secret[SECRET_KEYS.adminUsername] ?? '',
    POSTGRES_PASSWORD: secret[SECRET_KEYS.adminPassword] ?? '',
    APP_USER: secret[SECRET_KEYS.appUsername] ?? '',
    APP_PASSWORD: secret[SECRET_KEYS.appPassword] ?? '',
    APP_DATABASE: secret[SECRET_KEYS.database] ?? '',
    REPLICATION_USER: secret[SECRET_KEYS.replicationUsername] ?? '',
    REPLICATION_PASSWORD: secret[SECRET_KEYS.replicationPassword] ?? '',
    WAIT_SECONDS: '30',
  };
}

async function start(inst: Instance): Promise<void> {
  // The main container: `postgres -c config_file=/etc/opkit/postgresql.conf` (PGDATA from the env).
  await ok('pg_ctl', [
    'start',
    '-D',
    inst.pgdata,
    '-o',
    `-c config_file=${join(inst.configDir, POSTGRES_FILES.conf)}`,
    '-l',
    inst.log,
    '-w',
    '-t',
    '60',
  ]);
  started.push(inst);
}

/** psql as the superuser over the socket (peer authentication). */
function asAdmin(inst: Instance, sql: string, dbname = 'postgres'): Promise<Result> {
  return run('psql', [
    '-X',
    '-q',
    '-w',
    '-h',
    inst.socketDir,
    '-p',
    String(inst.port),
    '-U',
    'postgres',
    '-d',
    dbname,
    '-tAc',
    sql,
  ]);
}

/** psql as the application user over TCP with its password from the Secret (SCRAM). */
function asApp(inst: Instance, sql: string): Promise<Result> {
  const env = { PGPASSWORD: secret[SECRET_KEYS.appPassword] ?? '' };
  const user = secret[SECRET_KEYS.appUsername] ?? '';
  const dbname = secret[SECRET_KEYS.database] ?? '';
  return run(
    'psql',
    ['-X', '-q', '-w', '-h', '127.0.0.1', '-p', String(inst.port), '-U', user, '-d', dbname, '-tAc', sql],
    env,
  );
}

async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    assert.ok(Date.now() < deadline, `timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Stops a server the way the pod's preStop hook does; kills it by its pid only if that fails. */
async function stop(inst: Instance): Promise<void> {
  const [sh, flag, script] = postgresPreStopCommand();
  const r = await run(sh ?? 'sh', [flag ?? '-c', script ?? ''], { PGDATA: inst.pgdata });
  if (r.code === 0) return;
  const pidFile = join(inst.pgdata, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (pid > 0) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

describe('postgres streaming replication with the rendered scripts', { skip: skipReason }, () => {
  before(
    async () => {
      tmp = mkdtempSync(join(tmpdir(), 'opkit-pgrepl-'));
      if (IDS) chownSync(tmp, IDS.uid, IDS.gid);
      // The Secret the operator generates, decoded the way the kubelet hands it to the containers.
      secret = Object.fromEntries(
        Object.entries(credentialsSecret(db).data ?? {}).map(([k, v]) => [
          k,
          Buffer.from(v, 'base64').toString(),
        ]),
      );
      primary = await instance(`${NAME}-0`);
      replica = await instance(`${NAME}-1`);

      // The image's entrypoint on the primary: initdb with POSTGRES_USER / POSTGRES_PASSWORD and
      // POSTGRES_INITDB_ARGS (the StatefulSet sets --data-checksums).
      const pwfile = join(tmp, 'pwfile');
      writeOwned(pwfile, `${secret[SECRET_KEYS.adminPassword]}\n`);
      await ok('initdb', [
        `--username=${secret[SECRET_KEYS.adminUsername]}`,
        `--pwfile=${pwfile}`,
        '--data-checksums',
        '--encoding=UTF8',
        '--locale=C',
        '-D',
        primary.pgdata,
      ]);
      rmSync(pwfile);
      await start(primary);
      // ... then /docker-entrypoint-initdb.d: the ConfigMap's primary init script.
      const init = configMap(db).data?.[POSTGRES_FILES.primaryInit] ?? '';
      await ok('sh', ['-c', init], {
        ...podEnv(primary),
        PGHOST: primary.socketDir,
        PGPORT: String(primary.port),
      });
    },
    { timeout: 120_000 },
  );

  after(async () => {
    for (const inst of started.reverse()) await stop(inst);
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  test('the test runs the rendered files: only the port and paths differ from the pod', () => {
    const data = configMap(db).data ?? {};
    const pod = (data[POSTGRES_FILES.conf] ?? '').split('\n');
    const here = postgresConf(withDefaults(db), primary.paths).split('\n');
    assert.equal(pod.length, here.length);
    const differing = pod.filter((line, i) => line !== here[i]).map((l) => l.split(' = ')[0]);
    assert.deepEqual(differing.sort(), ['hba_file', 'listen_addresses', 'port', 'unix_socket_directories']);
  });

  test('the scripts get every variable they require from the StatefulSet', () => {
    const data = configMap(db).data ?? {};
    const sts = statefulSet(db, { configHash: configHash(configMap(db)) });
    const pod = sts.spec?.template.spec;
    const envOf = (name: string) =>
      [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])]
        .find((c) => c.name === name)
        ?.env?.map((e) => e.name) ?? [];
    for (const v of requiredEnv(data[POSTGRES_FILES.replicaBootstrap] ?? ''))
      assert.ok(envOf('bootstrap').includes(v), v);
    for (const v of requiredEnv(data[POSTGRES_FILES.primaryInit] ?? ''))
      assert.ok(envOf('postgres').includes(v), v);
    for (const v of Object.keys(podEnv(primary)).filter(
      (k) => k !== 'WAIT_SECONDS' && k !== 'PRIMARY_HOST' && k !== 'PRIMARY_PORT' && k !== 'PRIMARY_POD',
    )) {
      assert.ok(envOf('postgres').includes(v) || envOf('bootstrap').includes(v), v);
    }
  });

  test('the primary init script created the application and replication users', async () => {
    const roles = await asAdmin(
      primary,
      "SELECT rolname || ':' || rolreplication || ':' || rolsuper FROM pg_roles WHERE rolname IN ('app', 'replicator') ORDER BY 1",
    );
    assert.equal(roles.code, 0, roles.stderr);
    assert.deepEqual(roles.stdout.trim().split('\n'), ['app:false:false', 'replicator:true:false']);
    const owner = await asAdmin(
      primary,
      "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'app'",
    );
    assert.equal(owner.stdout.trim(), 'app');
    // The application user logs in over TCP with the Secret's password (SCRAM) and owns its schema.
    const created = await asApp(primary, 'CREATE TABLE orders (id int PRIMARY KEY, item text)');
    assert.equal(created.code, 0, created.stderr);
    const wrong = await run(
      'psql',
      ['-X', '-w', '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'app', '-d', 'app', '-c', 'SELECT 1'],
      { PGPASSWORD: 'wrong' },
    );
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /password authentication failed/);
  });

  test('the primary init script is idempotent', async () => {
    const init = configMap(db).data?.[POSTGRES_FILES.primaryInit] ?? '';
    await ok('sh', ['-c', init], {
      ...podEnv(primary),
      PGHOST: primary.socketDir,
      PGPORT: String(primary.port),
    });
    const check = await asApp(primary, 'SELECT count(*) FROM orders');
    assert.equal(check.stdout.trim(), '0');
  });

  test('the bootstrap does nothing on the primary pod', async () => {
    const script = configMap(db).data?.[POSTGRES_FILES.replicaBootstrap] ?? '';
    const elsewhere = join(tmp, 'not-created');
    const r = await run('sh', ['-c', script], { ...podEnv(primary), PGDATA: elsewhere });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /is the primary: nothing to do/);
    assert.equal(existsSync(elsewhere), false);
  });

  test('the bootstrap clones the primary into the empty replica with pg_basebackup -R', async () => {
    const script = configMap(db).data?.[POSTGRES_FILES.replicaBootstrap] ?? '';
    const r = await run('sh', ['-c', script], podEnv(replica));
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.ok(existsSync(join(replica.pgdata, 'PG_VERSION')));
    assert.ok(existsSync(join(replica.pgdata, 'standby.signal')), 'standby.signal written by -R');
    assert.equal(existsSync(`${replica.pgdata}.partial`), false);
    assert.equal(statSync(replica.pgdata).mode & 0o777, 0o700);
    const auto = readFileSync(join(replica.pgdata, 'postgresql.auto.conf'), 'utf8');
    assert.match(auto, /primary_conninfo = '.*user=replicator/);
    assert.match(auto, new RegExp(`application_name=''${replica.pod}''`));
    assert.match(auto, new RegExp(`port=${primary.port}`));
    await start(replica);
  });

  test('rows written on the primary appear on the replica', async () => {
    const insert = await asApp(
      primary,
      "INSERT INTO orders SELECT g, 'item ' || g FROM generate_series(1, 100) g",
    );
    assert.equal(insert.code, 0, insert.stderr);
    await eventually(
      '100 rows on the replica',
      async () => (await asApp(replica, 'SELECT count(*) FROM orders')).stdout.trim() === '100',
    );
    const last = await asApp(replica, 'SELECT item FROM orders WHERE id = 100');
    assert.equal(last.stdout.trim(), 'item 100');
  });

  test('the replica is read-only', async () => {
    const inRecovery = await asAdmin(replica, 'SELECT pg_is_in_recovery()');
    assert.equal(inRecovery.stdout.trim(), 't');
    const write = await asApp(replica, "INSERT INTO orders VALUES (1000, 'nope')");
    assert.notEqual(write.code, 0);
    assert.match(write.stderr, /read-only transaction/);
  });

  test('pg_stat_replication on the primary shows the standby streaming', async () => {
    await eventually('the standby streaming', async () => {
      const r = await asAdmin(primary, 'SELECT application_name, state, usename FROM pg_stat_replication');
      return r.stdout.trim() === `${replica.pod}|streaming|replicator`;
    });
    const r = await asAdmin(replica, 'SELECT status FROM pg_stat_wal_receiver');
    assert.equal(r.stdout.trim(), 'streaming');
  });

  test('the bootstrap leaves an initialized replica alone on restart', async () => {
    const script = configMap(db).data?.[POSTGRES_FILES.replicaBootstrap] ?? '';
    const before = statSync(join(replica.pgdata, 'PG_VERSION')).mtimeMs;
    const r = await run('sh', ['-c', script], podEnv(replica));
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /already holds a database: nothing to do/);
    assert.equal(statSync(join(replica.pgdata, 'PG_VERSION')).mtimeMs, before);
  });

  test("the StatefulSet's probes pass on both servers, and liveness fails when nothing answers", async () => {
    for (const inst of [primary, replica]) {
      const probes = postgresProbeCommands(inst.paths);
      for (const [kind, command] of Object.entries(probes)) {
        const [cmd, ...args] = command;
        const r = await run(cmd ?? '', args);
        assert.equal(r.code, 0, `${kind} probe on ${inst.pod}: ${r.stdout}${r.stderr}`);
      }
    }
    const nothing = postgresProbeCommands({ port: await freePort(), socketDir: primary.socketDir });
    for (const command of [nothing.startup, nothing.readiness, nothing.liveness]) {
      const [cmd, ...args] = command;
      const r = await run(cmd ?? '', args);
      assert.notEqual(r.code, 0, `${command.join(' ')} succeeded with no server`);
    }
  });

  test('both restart with the preStop fast shutdown and replication resumes', async () => {
    for (const inst of [replica, primary]) {
      const [sh, flag, script] = postgresPreStopCommand();
      const stopped = await run(sh ?? 'sh', [flag ?? '-c', script ?? ''], { PGDATA: inst.pgdata });
      assert.equal(stopped.code, 0, stopped.stderr);
      started.splice(started.indexOf(inst), 1);
      await start(inst);
    }
    const insert = await asApp(primary, "INSERT INTO orders VALUES (101, 'after restart')");
    assert.equal(insert.code, 0, insert.stderr);
    await eventually(
      'the row on the replica',
      async () =>
        (await asApp(replica, 'SELECT item FROM orders WHERE id = 101')).stdout.trim() === 'after restart',
    );
    assert.equal((await asAdmin(replica, 'SELECT pg_is_in_recovery()')).stdout.trim(), 't');
  });

  test('the bootstrap waits for the primary and gives up after WAIT_SECONDS', async () => {
    const script = configMap(db).data?.[POSTGRES_FILES.replicaBootstrap] ?? '';
    const env = {
      ...podEnv(replica),
      PGDATA: join(tmp, 'orphan', 'pgdata'),
      PRIMARY_PORT: String(await freePort()),
      WAIT_SECONDS: '2',
    };
    const r = await run('sh', ['-c', script], env);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /not ready after 2s/);
    assert.equal(existsSync(env.PGDATA), false);
  });
});
