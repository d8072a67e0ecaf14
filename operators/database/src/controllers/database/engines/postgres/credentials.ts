/**
 * credentials.sh: the `credentials` sidecar. Every CREDENTIALS_INTERVAL seconds (default 10) it
 *   - applies the SCRAM verifiers of the mounted Secret (kept current by the kubelet) on the primary:
 *     `ALTER ROLE ... PASSWORD '<verifier>'` for a role whose stored verifier differs, so a password
 *     changed in the Secret logs in (and the old one no longer does) without restarting anything, and the
 *     plain text never goes into SQL; replicas get it through replication;
 *   - rewrites the replication passfile (the in-memory volume) from the Secret, so that the next
 *     replication connection uses the current password;
 *   - on the primary, drops the inactive replication slots (`opkit_<pod>`) of pods that spec.replicas no
 *     longer has (INSTANCES_FILE, the ConfigMap's cluster-instances, updated in place by the kubelet):
 *     after a scale-down they would hold WAL up to max_slot_wal_keep_size for nothing.
 *   - reloads the server (pg_reload_conf) when the mounted server certificate (TLS_DIR: tls.crt, ca.crt)
 *     changed, which the kubelet does in place when the operator renews it: PostgreSQL loads the new
 *     certificate and key for new connections, without a restart (existing sessions keep theirs).
 * Over the local socket as the superuser (peer). Logs role names, never a value.
 * `credentials.sh once` does one pass (tests). Env: CREDENTIALS_DIR, PASSFILE, PGHOST, PGPORT;
 * POSTGRES_USER, CREDENTIALS_INTERVAL, INSTANCES_FILE, TLS_DIR.
 */
import { DERIVED_SECRET_KEYS, SECRET_KEYS } from '../../desired/names.ts';

/** The Secret keys the sidecar reads from its volume. */
export const CREDENTIAL_FILES = [
  SECRET_KEYS.appUsername,
  DERIVED_SECRET_KEYS.appPasswordScram,
  SECRET_KEYS.replicationUsername,
  SECRET_KEYS.replicationPassword,
  DERIVED_SECRET_KEYS.replicationPasswordScram,
] as const;

export function credentialsScript(): string {
  return `#!/bin/sh
# opkit-database-operator: applies password changes from the mounted Secret (SCRAM verifiers, no plain text).
set -u
: "\${CREDENTIALS_DIR:?}" "\${PASSFILE:?}" "\${PGHOST:?}" "\${PGPORT:?}"
mode=\${1:-loop}
interval=\${CREDENTIALS_INTERVAL:-10}
user=\${POSTGRES_USER:-postgres}
log() { printf 'credentials: %s\\n' "$*" >&2; }
sql() { psql -X -A -t -q -w -v ON_ERROR_STOP=1 -U "$user" -d postgres "$@"; }

refresh_passfile() {
  u="$CREDENTIALS_DIR/${SECRET_KEYS.replicationUsername}"
  p="$CREDENTIALS_DIR/${SECRET_KEYS.replicationPassword}"
  [ -s "$u" ] && [ -s "$p" ] || return 0
  old_umask=$(umask)
  umask 077
  {
    printf '*:*:*:'
    tr -d '\\n' <"$u" | sed 's/[\\\\:]/\\\\&/g'
    printf ':'
    tr -d '\\n' <"$p" | sed 's/[\\\\:]/\\\\&/g'
    printf '\\n'
  } >"$PASSFILE.new"
  umask "$old_umask"
  if cmp -s "$PASSFILE.new" "$PASSFILE"; then
    rm -f "$PASSFILE.new"
  else
    mv "$PASSFILE.new" "$PASSFILE"
    log "replication passfile updated"
  fi
}

# $1: the file with the role name, $2: the file with its SCRAM verifier.
apply() {
  [ -s "$CREDENTIALS_DIR/$1" ] && [ -s "$CREDENTIALS_DIR/$2" ] || return 0
  ROLE_FILE="$CREDENTIALS_DIR/$1"
  VERIFIER_FILE="$CREDENTIALS_DIR/$2"
  export ROLE_FILE VERIFIER_FILE
  sql <<'EOSQL' | while IFS= read -r role; do log "applied the new password of role $role"; done
\\set role \`cat "$ROLE_FILE"\`
\\set verifier \`cat "$VERIFIER_FILE"\`
SELECT count(*) > 0 AS needed, coalesce(max(format('ALTER ROLE %I PASSWORD %L', rolname, :'verifier')), '') AS stmt
  FROM pg_authid
  WHERE rolname = :'role' AND rolpassword IS DISTINCT FROM :'verifier' AND NOT pg_is_in_recovery() \\gset
\\if :needed
:stmt;
\\echo :role
\\endif
EOSQL
}

# Slots of pods that are not instances any more (scaled down): dropped, on the primary, when inactive.
drop_removed_slots() {
  [ -n "\${INSTANCES_FILE:-}" ] && [ -s "$INSTANCES_FILE" ] || return 0
  export INSTANCES_FILE
  sql <<'EOSQL' | while IFS= read -r slot; do [ -z "$slot" ] || log "dropped replication slot $slot of a removed instance"; done
\\set instances \`tr '\\n' ' ' <"$INSTANCES_FILE"\`
WITH removed AS MATERIALIZED (
  SELECT slot_name FROM pg_replication_slots
   WHERE NOT pg_is_in_recovery() AND NOT active AND slot_type = 'physical' AND slot_name LIKE 'opkit\\_%'
     AND slot_name <> ALL (SELECT 'opkit_' || translate(lower(p), '-.', '__')
                             FROM regexp_split_to_table(trim(:'instances'), '\\s+') p))
SELECT r.slot_name FROM removed r, LATERAL (SELECT pg_drop_replication_slot(r.slot_name)) d;
EOSQL
}

# The certificate files as last loaded: a reload when they change (the first pass reloads once too).
tls_loaded=''
reload_tls() {
  [ -n "\${TLS_DIR:-}" ] && [ -s "$TLS_DIR/tls.crt" ] || return 0
  sum=$(cat "$TLS_DIR/tls.crt" "$TLS_DIR/ca.crt" 2>/dev/null | cksum)
  [ "$sum" != "$tls_loaded" ] || return 0
  if [ "$(sql -c 'SELECT pg_reload_conf()')" = t ]; then
    [ -z "$tls_loaded" ] || log "server certificate changed: configuration reloaded"
    tls_loaded=$sum
  fi
}

pass() {
  refresh_passfile
  if pg_isready -q -h "$PGHOST" -p "$PGPORT" -U "$user" -d postgres; then
    apply ${SECRET_KEYS.appUsername} ${DERIVED_SECRET_KEYS.appPasswordScram}
    apply ${SECRET_KEYS.replicationUsername} ${DERIVED_SECRET_KEYS.replicationPasswordScram}
    drop_removed_slots
    reload_tls
  fi
}

if [ "$mode" = once ]; then
  pass
  exit 0
fi
trap 'exit 0' TERM INT
while :; do
  pass
  sleep "$interval" &
  wait $!
done
`;
}
