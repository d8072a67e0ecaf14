/**
 * The images opkit builds from Debian packages (never an official image's name: these are not them).
 * Each recipe is data; build.ts turns it into a rootfs with mmdebstrap (or gcc for pause).
 */
import type { ImageConfig } from './oci.ts';

export const IMAGE_PREFIX = 'opkit.local';
export const PAUSE_IMAGE = `${IMAGE_PREFIX}/pause:1`;
export const SHELL_IMAGE = `${IMAGE_PREFIX}/shell:1`;
export const POSTGRES_IMAGE = `${IMAGE_PREFIX}/postgres:15`;

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
    include: ['postgresql-15'],
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
};

export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
