/**
 * Real PostgreSQL instances on this machine, run exactly as the operator's pods run them: the ConfigMap's
 * instance.sh (the init container's `bootstrap`, the server container's `start`, which execs postgres),
 * its health.sh (the probes), its postgresql.conf (rendered with this machine's port, socket and config
 * directory instead of the pod's) and pg_hba.conf, with the environment the StatefulSet gives the
 * containers (credentials from the Secret the operator generates; PRIMARY_HOST/PORT point at another
 * local instance instead of `<pod>.<name>-headless:5432`). TLS: a CA and a server certificate made by the
 * operator's own code (tls/pki.ts) for the names the pods' certificate holds, plus 127.0.0.1 (what
 * PRIMARY_HOST is here), in each instance's `tls` directory as the Secret volume gives them to the pod.
 *
 * Needs the PostgreSQL server binaries (Debian: apt-get install postgresql). Postgres refuses to run as
 * root: as root, every process runs as the `postgres` OS user the package creates.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@opkit/controlplane';
import { eventually } from '@opkit/runtime/testing';
import type { Database } from '../../src/api/v1/database.ts';
import {
  configMap,
  credentialsSecret,
  DERIVED_SECRET_KEYS,
  SECRET_KEYS,
  withDefaults,
} from '../../src/controllers/database/desired/index.ts';
import { serverHosts } from '../../src/controllers/database/desired/tls.ts';
import {
  POSTGRES_FILES,
  type PostgresPaths,
  postgresConf,
  postgresPreStopCommand,
} from '../../src/controllers/database/engines/index.ts';
import { parseInstanceReport } from '../../src/controllers/database/engines/postgres/report.ts';
import {
  type CertificatePem,
  generateCa,
  issueServerCertificate,
} from '../../src/controllers/database/tls/pki.ts';

/** The newest installed PostgreSQL with the tools the pods use. */
function findPgBin(): string | undefined {
  if (process.env.OPKIT_PG_BIN) return process.env.OPKIT_PG_BIN;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const majors = readdirSync(root)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  const tools = ['initdb', 'pg_ctl', 'postgres', 'pg_basebackup', 'pg_isready', 'psql', 'pg_rewind'];
  for (const m of majors) {
    const bin = join(root, m, 'bin');
    if (tools.every((t) => existsSync(join(bin, t)))) return bin;
  }
  return undefined;
}

export const PG_BIN = findPgBin();
const isRoot = process.getuid?.() === 0;
function postgresIds(): { uid: number; gid: number } | undefined {
  if (!isRoot) return undefined;
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) return undefined;
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}
const IDS = postgresIds();
const osUser = isRoot ? 'postgres' : (process.env.USER ?? '');
export const skipReason = !PG_BIN
  ? 'PostgreSQL server binaries not found (apt-get install postgresql)'
  : isRoot && !IDS
    ? 'running as root but there is no postgres OS user (apt-get install postgresql creates it)'
    : !isRoot && osUser !== 'postgres'
      ? 'run as root or as the postgres OS user (peer authentication maps that user to the superuser)'
      : undefined;
if (skipReason && process.env.CI) throw new Error(`replication test cannot run in CI: ${skipReason}`);

const majorVersion = PG_BIN ? (PG_BIN.split('/').at(-2) ?? '16') : '16';
export const PG_VERSION = ['14', '15', '16', '17'].includes(majorVersion) ? majorVersion : '16';

/** A postgres Database of `replicas` instances, spec.parameters as given. */
export function pgDatabase(name: string, parameters?: Record<string, string>, replicas = 2): Database {
  return {
    apiVersion: 'myapp.example.com/v1',
    kind: 'Database',
    metadata: { name, namespace: 'shop' },
    spec: {
      engine: 'postgres',
      version: PG_VERSION,
      storage: '1Gi',
      replicas,
      ...(parameters ? { parameters } : {}),
    },
  };
}

export interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface Instance {
  pod: string;
  port: number;
  root: string;
  pgdata: string;
  configDir: string;
  socketDir: string;
  paths: PostgresPaths;
  log: string;
  terminationLog: string;
  server?: ChildProcess;
}

/** What the operator recorded, as the pods get it from the ConfigMap's cluster keys. */
export interface Record_ {
  primary: Instance;
  systemIdentifier?: string;
}

/** A set of instances of one Database in a temporary directory. */
export class Cluster {
  readonly db: Database;
  readonly tmp: string;
  readonly secret: Record<string, string>;
  readonly instances: Instance[] = [];
  /** The Database's CA and server certificate (made at the first instance()). */
  tls: { ca: CertificatePem; server: CertificatePem } | undefined;

  constructor(db: Database) {
    this.db = db;
    this.tmp = mkdtempSync(join(tmpdir(), 'opkit-pg-'));
    if (IDS) chownSync(this.tmp, IDS.uid, IDS.gid);
    // The Secret the operator generates, decoded the way the kubelet hands it to the containers.
    this.secret = Object.fromEntries(
      Object.entries(credentialsSecret(db).data ?? {}).map(([k, v]) => [
        k,
        Buffer.from(v, 'base64').toString(),
      ]),
    );
  }

  file(name: string): string {
    return configMap(this.db).data?.[name] ?? '';
  }

  run(cmd: string, args: string[], env: Record<string, string> = {}, input = ''): Promise<Result> {
    return new Promise((resolve, reject) => {
      const child = spawn(cmd, args, {
        env: { PATH: `${PG_BIN}:/usr/local/bin:/usr/bin:/bin`, HOME: this.tmp, LC_ALL: 'C', ...env },
        cwd: this.tmp,
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
      child.stdin.on('error', () => {});
      child.stdin.end(input);
    });
  }

  async ok(cmd: string, args: string[], env: Record<string, string> = {}): Promise<string> {
    const r = await this.run(cmd, args, env);
    assert.equal(r.code, 0, `${cmd} ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
    return r.stdout;
  }

  /** A directory (or file, below) owned by the user the servers run as. */
  mkdirOwned(path: string): void {
    mkdirSync(path, { recursive: true, mode: 0o700 });
    if (IDS) chownSync(path, IDS.uid, IDS.gid);
  }

  writeOwned(path: string, text: string, mode: number): void {
    writeFileSync(path, text, { mode });
    if (IDS) chownSync(path, IDS.uid, IDS.gid);
  }

  /** A pod's volumes and ConfigMap mount, with a free port. */
  async instance(pod: string): Promise<Instance> {
    const root = join(this.tmp, pod);
    const port = await freePort();
    const configDir = join(root, 'config');
    const socketDir = join(root, 'run');
    const inst: Instance = {
      pod,
      port,
      root,
      // Like the pod: the data directory is a subdirectory of the volume's mount.
      pgdata: join(root, 'data', 'pgdata'),
      configDir,
      socketDir,
      paths: { port, configDir, socketDir, listenAddresses: '127.0.0.1', tlsDir: join(root, 'tls') },
      log: join(root, 'postgres.log'),
      terminationLog: join(root, 'termination-log'),
    };
    for (const dir of [root, join(root, 'data'), configDir, socketDir, inst.paths.tlsDir])
      this.mkdirOwned(dir);
    await this.writeTls(inst);
    const conf = postgresConf(withDefaults(this.db), inst.paths);
    this.writeOwned(join(configDir, POSTGRES_FILES.conf), conf, 0o444);
    this.writeOwned(join(configDir, POSTGRES_FILES.hba), this.file(POSTGRES_FILES.hba), 0o444);
    this.writeOwned(join(configDir, POSTGRES_FILES.health), this.file(POSTGRES_FILES.health), 0o444);
    this.instances.push(inst);
    return inst;
  }

  /**
   * The server certificate Secret's files in the instance's tls directory as the kubelet makes them in
   * the pod (defaultMode 0640, fsGroup 999): owned by root, group the server's, 0640, which PostgreSQL
   * accepts for a root-owned key. Not root: the server's user owns them, 0600. Replaced whole, as the
   * kubelet swaps the Secret volume's files. `server`: another certificate (a renewal).
   */
  async writeTls(inst: Instance, server?: CertificatePem): Promise<void> {
    if (!this.tls) {
      const ca = await generateCa('shop/test');
      this.tls = {
        ca,
        server: await issueServerCertificate(ca, [...serverHosts(withDefaults(this.db)), '127.0.0.1']),
      };
    }
    const dir = inst.paths.tlsDir;
    const cert = server ?? this.tls.server;
    const files: [string, string][] = [
      ['tls.crt', cert.certPem],
      ['tls.key', cert.keyPem],
      ['ca.crt', this.tls.ca.certPem],
    ];
    for (const [name, text] of files) {
      const tmp = join(dir, `.${name}.new`);
      writeFileSync(tmp, text, { mode: IDS ? 0o640 : 0o600 });
      if (IDS) chownSync(tmp, 0, IDS.gid);
      renameSync(tmp, join(dir, name));
    }
  }

  /** The Secret's replication password as the pod mounts it: a file (written from the current Secret). */
  replicationPasswordFile(inst: Instance): string {
    const path = join(inst.configDir, SECRET_KEYS.replicationPassword);
    rmSync(path, { force: true });
    this.writeOwned(path, this.secret[SECRET_KEYS.replicationPassword] ?? '', 0o400);
    return path;
  }

  /** The environment the StatefulSet gives the containers, with this machine's hosts and paths. */
  env(inst: Instance, record: Record_): Record<string, string> {
    const s = this.secret;
    return {
      PGDATA: inst.pgdata,
      PG_MAJOR: this.db.spec.version,
      PGHOST: inst.socketDir,
      PGPORT: String(inst.port),
      CONFIG_FILE: join(inst.configDir, POSTGRES_FILES.conf),
      PASSFILE: join(inst.socketDir, 'pgpass'),
      TLS_CA_FILE: join(inst.paths.tlsDir, 'ca.crt'),
      POD_NAME: inst.pod,
      PRIMARY_POD: record.primary.pod,
      PRIMARY_HOST: '127.0.0.1',
      PRIMARY_PORT: String(record.primary.port),
      CLUSTER_SYSTEM_ID: record.systemIdentifier ?? '',
      POSTGRES_USER: s[SECRET_KEYS.adminUsername] ?? '',
      REPLICATION_USER: s[SECRET_KEYS.replicationUsername] ?? '',
      REPLICATION_PASSWORD_FILE: this.replicationPasswordFile(inst),
      APP_USER: s[SECRET_KEYS.appUsername] ?? '',
      APP_PASSWORD_SCRAM: s[DERIVED_SECRET_KEYS.appPasswordScram] ?? '',
      REPLICATION_PASSWORD_SCRAM: s[DERIVED_SECRET_KEYS.replicationPasswordScram] ?? '',
      APP_DATABASE: s[SECRET_KEYS.database] ?? '',
      WAIT_SECONDS: '30',
      REPAIR_WAIT_SECONDS: '10',
      TERMINATION_LOG: inst.terminationLog,
      // The pod's designation files (the operator's on the in-memory volume, the ConfigMap's mounted copy).
      DESIGNATION_FILE: join(inst.socketDir, 'primary'),
      PRIMARY_FILE: join(inst.root, 'cluster-primary'),
      PRIMARY_EPOCH_FILE: join(inst.root, 'cluster-primary-epoch'),
      PRIMARY_WITHOUT_TLS_FILE: join(inst.root, 'cluster-primary-without-tls'),
    };
  }

  /**
   * A command the operator runs in the pod's server container through pods/exec (`sh -c ...`), with the
   * container's environment.
   */
  exec(inst: Instance, record: Record_, command: readonly string[]): Promise<Result> {
    const [cmd, ...args] = command;
    return this.run(cmd ?? 'sh', args, this.env(inst, record));
  }

  /** The init container: `instance.sh bootstrap`. */
  bootstrap(inst: Instance, record: Record_, extra: Record<string, string> = {}): Promise<Result> {
    rmSync(inst.terminationLog, { force: true });
    const script = this.file(POSTGRES_FILES.instance);
    return this.run('sh', ['-c', script, 'instance.sh', 'bootstrap'], {
      ...this.env(inst, record),
      ...extra,
    });
  }

  /** What the script reported in its termination message. */
  report(inst: Instance): ReturnType<typeof parseInstanceReport> {
    return parseInstanceReport(
      existsSync(inst.terminationLog) ? readFileSync(inst.terminationLog, 'utf8') : '',
    );
  }

  /**
   * The server container: `instance.sh start`, which checks (and repairs), then execs postgres. Resolves
   * once the server accepts connections (`answering`: or answers "starting up", a standby that is not
   * consistent yet); rejects with the log when the script exits first.
   */
  async start(
    inst: Instance,
    record: Record_,
    extra: Record<string, string> = {},
    until: 'accepting' | 'answering' = 'accepting',
  ): Promise<void> {
    rmSync(inst.terminationLog, { force: true });
    const script = this.file(POSTGRES_FILES.instance);
    const fd = openSync(inst.log, 'a');
    const child = spawn('sh', ['-c', script, 'instance.sh', 'start'], {
      env: {
        PATH: `${PG_BIN}:/usr/local/bin:/usr/bin:/bin`,
        HOME: this.tmp,
        LC_ALL: 'C',
        ...this.env(inst, record),
        ...extra,
      },
      cwd: this.tmp,
      stdio: ['ignore', fd, fd],
      ...(IDS ?? {}),
    });
    closeSync(fd);
    inst.server = child;
    let exited: number | null | undefined;
    child.on('exit', (code) => {
      exited = code;
      if (inst.server === child) inst.server = undefined;
    });
    await eventually(
      `${inst.pod} accepting connections`,
      async () => {
        if (exited !== undefined) {
          throw new Error(`instance.sh start exited (${exited}):\n${readFileSync(inst.log, 'utf8')}`);
        }
        const r = await this.run('pg_isready', ['-q', '-h', inst.socketDir, '-p', String(inst.port)]);
        return r.code === 0 || (until === 'answering' && r.code === 1);
      },
      { timeoutMs: 120_000, intervalMs: 200 },
    ).catch((err: unknown) => {
      throw exited !== undefined ? err : new Error(`${String(err)}\n${readFileSync(inst.log, 'utf8')}`);
    });
  }

  /** `instance.sh start` when it is expected to refuse: its exit code and output. */
  async startRefused(inst: Instance, record: Record_, extra: Record<string, string> = {}): Promise<Result> {
    rmSync(inst.terminationLog, { force: true });
    const script = this.file(POSTGRES_FILES.instance);
    return this.run('sh', ['-c', script, 'instance.sh', 'start'], { ...this.env(inst, record), ...extra });
  }

  /** Stops a server the way the pod's preStop hook does, and waits for the container's process. */
  async stop(inst: Instance): Promise<void> {
    const [sh, flag, script] = postgresPreStopCommand();
    const child = inst.server;
    await this.run(sh ?? 'sh', [flag ?? '-c', script ?? ''], { PGDATA: inst.pgdata });
    if (child && child.exitCode === null && child.signalCode === null) {
      await new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        if (child.exitCode !== null || child.signalCode !== null) resolve();
      });
    }
    inst.server = undefined;
  }

  /** A health probe of the StatefulSet: `sh /etc/opkit/health.sh ready|live|startup` with the container's env. */
  probe(
    inst: Instance,
    record: Record_,
    mode: 'ready' | 'live' | 'startup',
    extra: Record<string, string> = {},
  ) {
    return this.run('sh', ['-c', this.file(POSTGRES_FILES.health), 'health.sh', mode], {
      ...this.env(inst, record),
      ...extra,
    });
  }

  /** psql as the superuser over the socket (peer authentication). */
  asAdmin(inst: Instance, sql: string, dbname = 'postgres'): Promise<Result> {
    return this.run('psql', [
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

  async sql(inst: Instance, sql: string, dbname = 'postgres'): Promise<string> {
    const r = await this.asAdmin(inst, sql, dbname);
    assert.equal(r.code, 0, `${sql} on ${inst.pod}: ${r.stderr}`);
    return r.stdout.trim();
  }

  /** psql as the application user over TCP with a password (SCRAM). */
  asApp(inst: Instance, sql: string, password = this.secret[SECRET_KEYS.appPassword] ?? ''): Promise<Result> {
    const user = this.secret[SECRET_KEYS.appUsername] ?? '';
    const dbname = this.secret[SECRET_KEYS.database] ?? '';
    return this.run(
      'psql',
      ['-X', '-q', '-w', '-h', '127.0.0.1', '-p', String(inst.port), '-U', user, '-d', dbname, '-tAc', sql],
      { PGPASSWORD: password },
    );
  }

  /**
   * psql with a libpq connection string (as an application connects), the password in PGPASSWORD;
   * `HOME` is the cluster's directory, so no ~/.postgresql/root.crt of this machine plays a part.
   */
  connect(conninfo: string, sql: string, password = ''): Promise<Result> {
    return this.run(
      'psql',
      ['-X', '-q', '-w', '-tA', '-d', conninfo, '-c', sql],
      password ? { PGPASSWORD: password } : {},
    );
  }

  /** The standby streams from the primary (pg_stat_replication on the primary, the receiver on it). */
  async streaming(primary: Instance, replica: Instance): Promise<void> {
    await eventually(
      `${replica.pod} streaming from ${primary.pod}`,
      async () => {
        const r = await this.asAdmin(
          primary,
          `SELECT state FROM pg_stat_replication WHERE application_name = '${replica.pod}'`,
        );
        return r.stdout.trim() === 'streaming';
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  }

  /** Stops every server still running (also those a failed test left behind), then removes the files. */
  async close(): Promise<void> {
    for (const inst of [...this.instances].reverse()) {
      const pidFile = join(inst.pgdata, 'postmaster.pid');
      if (!inst.server && !existsSync(pidFile)) continue;
      await this.stop(inst).catch(() => {});
      if (!existsSync(pidFile)) continue;
      const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
      try {
        if (pid > 0) process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    rmSync(this.tmp, { recursive: true, force: true });
  }
}
