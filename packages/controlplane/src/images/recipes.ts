/**
 * The images opkit builds from Debian packages (never an official image's name: these are not them).
 * Each recipe is data; build.ts turns it into a rootfs with mmdebstrap (or gcc for pause).
 */
import type { ImageConfig } from './oci.ts';

export const IMAGE_PREFIX = 'opkit.local';
export const PAUSE_IMAGE = `${IMAGE_PREFIX}/pause:1`;
export const SHELL_IMAGE = `${IMAGE_PREFIX}/shell:1`;
export const POSTGRES_IMAGE = `${IMAGE_PREFIX}/postgres:15`;
export const MARIADB_IMAGE = `${IMAGE_PREFIX}/mariadb:10.11`;
/** The local stand-in for the official node:24(-slim) image, the base `opkit build` puts operators on. */
export const NODE_IMAGE = `${IMAGE_PREFIX}/node:24`;

export interface ImageRecipe {
  name: string;
  /** 'pause': a static binary compiled from pause.c; 'debian': an mmdebstrap rootfs. */
  kind: 'pause' | 'debian';
  /** Packages on top of the Essential set (mmdebstrap --include). */
  include?: string[];
  /** Shell run in the rootfs ($1) after the Essential set, before the included packages. */
  essentialHook?: string;
  /** Shell run in the finished rootfs ($1). */
  customizeHook?: string;
  /** Adds the Node binary of the npm `node` package (node_modules) as /usr/local/bin/node. */
  nodeBinary?: boolean;
  config: ImageConfig;
}

const PATH = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

// Like the official postgres image: user postgres 999:999 created before the packages (so files get
// that owner), no default cluster, binaries on PATH, PGDATA under /var/lib/postgresql/data, an
// entrypoint that initialises PGDATA from POSTGRES_* variables and drops root.
const POSTGRES_ENTRYPOINT = `#!/bin/bash
# opkit.local/postgres:15 entrypoint (a small counterpart of the official image's docker-entrypoint.sh).
set -euo pipefail
if [ "\${1:0:1}" = '-' ]; then set -- postgres "$@"; fi
if [ "\${1:-}" = 'postgres' ]; then
  if [ "$(id -u)" = '0' ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
  fi
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile="$(mktemp)"
    printf '%s' "\${POSTGRES_PASSWORD:-}" > "$pwfile"
    pwflag=()
    if [ -n "\${POSTGRES_PASSWORD:-}" ]; then pwflag=(--pwfile="$pwfile"); fi
    # shellcheck disable=SC2086
    initdb --username="\${POSTGRES_USER:-postgres}" "\${pwflag[@]}" -D "$PGDATA" \${POSTGRES_INITDB_ARGS:-}
    rm -f "$pwfile"
    method=trust
    if [ -n "\${POSTGRES_PASSWORD:-}" ]; then method="\${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"; fi
    printf 'host all all all %s\\n' "$method" >> "$PGDATA/pg_hba.conf"
    printf "listen_addresses = '*'\\n" >> "$PGDATA/postgresql.conf"
    db="\${POSTGRES_DB:-\${POSTGRES_USER:-postgres}}"
    if [ "$db" != 'postgres' ]; then
      echo "CREATE DATABASE \\"$db\\"" | postgres --single -D "$PGDATA" postgres >/dev/null
    fi
  fi
fi
exec "$@"
`;

// Like the official mariadb image: user mysql 999:999, /var/lib/mysql, /run/mysqld, an entrypoint that
// initialises the data directory from MARIADB_* variables and drops root, then runs mariadbd.
const MARIADB_ENTRYPOINT = `#!/bin/bash
# opkit.local/mariadb:10.11 entrypoint (a small counterpart of the official image's docker-entrypoint.sh).
set -euo pipefail
if [ "\${1:0:1}" = '-' ]; then set -- mariadbd "$@"; fi
if [ "\${1:-}" = 'mariadbd' ]; then
  if [ "$(id -u)" = '0' ]; then
    mkdir -p /var/lib/mysql /run/mysqld
    chown -R mysql:mysql /var/lib/mysql /run/mysqld
    exec setpriv --reuid=mysql --regid=mysql --init-groups "$0" "$@"
  fi
  if [ ! -d /var/lib/mysql/mysql ]; then
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db --auth-root-authentication-method=normal >/dev/null
    # --bootstrap reads one statement per line, and loads the grant tables at the first FLUSH PRIVILEGES.
    sql="FLUSH PRIVILEGES;"
    sql="$sql"$'\\n'"CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '\${MARIADB_ROOT_PASSWORD:-}';"
    sql="$sql"$'\\n'"GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;"
    sql="$sql"$'\\n'"ALTER USER 'root'@'localhost' IDENTIFIED BY '\${MARIADB_ROOT_PASSWORD:-}';"
    if [ -n "\${MARIADB_DATABASE:-}" ]; then sql="$sql"$'\\n'"CREATE DATABASE IF NOT EXISTS \\\`$MARIADB_DATABASE\\\`;"; fi
    if [ -n "\${MARIADB_USER:-}" ]; then
      sql="$sql"$'\\n'"CREATE USER '$MARIADB_USER'@'%' IDENTIFIED BY '\${MARIADB_PASSWORD:-}';"
      if [ -n "\${MARIADB_DATABASE:-}" ]; then sql="$sql"$'\\n'"GRANT ALL ON \\\`$MARIADB_DATABASE\\\`.* TO '$MARIADB_USER'@'%';"; fi
    fi
    printf '%s\\nFLUSH PRIVILEGES;\\n' "$sql" | mariadbd --bootstrap --datadir=/var/lib/mysql --skip-networking >/dev/null
  fi
fi
exec "$@"
`;

export const RECIPES: Record<string, ImageRecipe> = {
  [PAUSE_IMAGE]: { name: PAUSE_IMAGE, kind: 'pause', config: { entrypoint: ['/pause'] } },
  [SHELL_IMAGE]: {
    name: SHELL_IMAGE,
    kind: 'debian',
    // Essential gives bash, coreutils, grep, sed, getent; procps adds ps, iproute2 `ip`.
    include: ['procps', 'iproute2'],
    config: { env: [PATH], cmd: ['/bin/bash'] },
  },
  [POSTGRES_IMAGE]: {
    name: POSTGRES_IMAGE,
    kind: 'debian',
    // curl: the credentials sidecar renews the primary's Lease with it (engines/postgres/lease.ts).
    include: ['postgresql-15', 'curl'],
    essentialHook: [
      'echo "postgres:x:999:" >> "$1/etc/group"',
      'echo "postgres:x:999:999:PostgreSQL administrator:/var/lib/postgresql:/bin/bash" >> "$1/etc/passwd"',
      'echo "postgres:*:19000:0:99999:7:::" >> "$1/etc/shadow"',
      'mkdir -p "$1/etc/postgresql-common"',
      'echo "create_main_cluster = false" > "$1/etc/postgresql-common/createcluster.conf"',
    ].join(' && '),
    customizeHook: [
      'mkdir -p "$1/var/run/postgresql" "$1/var/lib/postgresql/data" "$1/usr/local/bin"',
      'chown -R 999:999 "$1/var/run/postgresql" "$1/var/lib/postgresql"',
      'chmod 3777 "$1/var/run/postgresql"',
      'chmod 700 "$1/var/lib/postgresql/data"',
      `printf '%s' ${shellQuote(POSTGRES_ENTRYPOINT)} > "$1/usr/local/bin/docker-entrypoint.sh"`,
      'chmod 755 "$1/usr/local/bin/docker-entrypoint.sh"',
    ].join(' && '),
    config: {
      env: [
        `${PATH}:/usr/lib/postgresql/15/bin`,
        'PG_MAJOR=15',
        'PGDATA=/var/lib/postgresql/data',
        'LANG=C.UTF-8',
      ],
      entrypoint: ['docker-entrypoint.sh'],
      cmd: ['postgres'],
      stopSignal: 'SIGINT',
      exposedPorts: ['5432/tcp'],
      volumes: ['/var/lib/postgresql/data'],
    },
  },
  [NODE_IMAGE]: {
    name: NODE_IMAGE,
    kind: 'debian',
    // The Node binary links libstdc++ and libgcc_s; ca-certificates for TLS to API servers outside the cluster.
    include: ['libstdc++6', 'ca-certificates'],
    nodeBinary: true,
    config: { env: [PATH, 'LANG=C.UTF-8'], cmd: ['node'] },
  },
  [MARIADB_IMAGE]: {
    name: MARIADB_IMAGE,
    kind: 'debian',
    include: ['mariadb-server'],
    essentialHook: [
      'echo "mysql:x:999:" >> "$1/etc/group"',
      'echo "mysql:x:999:999:MariaDB Server:/nonexistent:/bin/false" >> "$1/etc/passwd"',
      'echo "mysql:*:19000:0:99999:7:::" >> "$1/etc/shadow"',
    ].join(' && '),
    customizeHook: [
      'mkdir -p "$1/var/lib/mysql" "$1/run/mysqld" "$1/usr/local/bin"',
      'rm -rf "$1"/var/lib/mysql/*',
      'chown -R 999:999 "$1/var/lib/mysql" "$1/run/mysqld"',
      // Listen on the pod's addresses, not only loopback (Debian's default bind-address is 127.0.0.1).
      `printf '[mariadbd]\\nbind-address = 0.0.0.0\\nskip-name-resolve\\n' > "$1/etc/mysql/mariadb.conf.d/99-opkit.cnf"`,
      `printf '%s' ${shellQuote(MARIADB_ENTRYPOINT)} > "$1/usr/local/bin/docker-entrypoint.sh"`,
      'chmod 755 "$1/usr/local/bin/docker-entrypoint.sh"',
    ].join(' && '),
    config: {
      env: [PATH, 'LANG=C.UTF-8'],
      entrypoint: ['docker-entrypoint.sh'],
      cmd: ['mariadbd'],
      exposedPorts: ['3306/tcp'],
      volumes: ['/var/lib/mysql'],
    },
  },
};

export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
