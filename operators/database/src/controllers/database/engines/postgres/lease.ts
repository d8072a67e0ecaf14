/**
 * lease.sh: the primary lease, a fence that does not need the kubelet (Patroni's leader key,
 * CloudNativePG's instance manager). It runs in the `credentials` sidecar (started beside
 * credentials.sh), the only container that gets the instance ServiceAccount's token.
 *
 * Every LEASE_INTERVAL seconds (default 2), on an instance whose server runs OUT OF RECOVERY (a writable
 * primary; replicas and stopped servers do nothing):
 *   - GET the Lease `<db>-primary` (desired/lease.ts); the operator sets its holderIdentity to the
 *     designated primary, and to '' while it fences in a failover;
 *   - holderIdentity is this pod: renew (PUT with the resourceVersion read, renewTime now); a success
 *     records the node's monotonic clock (/proc/uptime, never the wall clock) in RENEWED_FILE, on the
 *     pod's in-memory volume (it survives a restart of the container, not of the pod);
 *   - holderIdentity is someone else or '': FENCE at once;
 *   - it could not renew for LEASE_SECONDS - LEASE_SLACK seconds since its last success (the slack covers
 *     one interval and one request timeout, so the fence starts at most LEASE_SECONDS after the last
 *     successful renewal): FENCE.
 * A Lease with the off annotation (LEASE_OFF_ANNOTATION: one instance, nothing to fail over to) is
 * neither renewed nor acted on, and the last renewal is forgotten (no timeout fence).
 * An instance that never renewed (no RENEWED_FILE: no token, no curl in a custom image, RBAC missing)
 * does not fence on a timeout: the operator does not count on the lease for it either (it sees no
 * renewTime) and falls back to its other signals.
 * FENCE: the designation file says `none` with the epoch of the designation that named this pod (the
 * operator's file wins a tie with the ConfigMap, so instance.sh, when the server starts again, waits for a
 * new designation instead of starting a primary), then the server stops (fast, then immediate after
 * FENCE_STOP_SECONDS), then, when the API answers, an acknowledgement on the Lease (annotation
 * FENCED_ANNOTATION = this pod) that lets the operator promote without waiting for the lease to expire.
 * Env: POD_NAME, POD_NAMESPACE, LEASE_NAME, LEASE_SECONDS, PGDATA, PGHOST, PGPORT, POSTGRES_USER,
 * LEASE_TOKEN_DIR (token, ca.crt), KUBERNETES_SERVICE_HOST/PORT (the kubelet's); optional LEASE_INTERVAL,
 * LEASE_SLACK, RENEWED_FILE, DESIGNATION_FILE, FENCE_STOP_SECONDS.
 */
import { GROUP } from '../../../../api/v1/database.ts';
import { designationShell } from './designation.ts';
import { POSTGRES_DESIGNATION_FILE } from './failover.ts';

/** The annotation the sidecar puts on the Lease once it fenced itself: the pod's name. */
export const LEASE_FENCED_ANNOTATION = `${GROUP}/fenced`;
/**
 * The operator's annotation on a Lease it does not guard a primary with (one instance: nothing to fail
 * over to): the sidecar neither renews nor fences, and forgets its last renewal.
 */
export const LEASE_OFF_ANNOTATION = `${GROUP}/lease-off`;
/** Where the projected token and the cluster's CA are mounted in the sidecar (never in the server's). */
export const LEASE_TOKEN_DIR = '/var/run/secrets/opkit-lease';
/** The sidecar's record of its last successful renewal (seconds of /proc/uptime). */
export const LEASE_RENEWED_FILE = `${POSTGRES_DESIGNATION_FILE.replace(/\/[^/]*$/, '')}/lease-renewed`;
/** Seconds between two looks at the Lease. */
export const LEASE_INTERVAL_SECONDS = 2;
/** One interval plus one request's timeout: the sidecar fences this much before LEASE_SECONDS run out. */
export const LEASE_SLACK_SECONDS = 4;

export function leaseScript(): string {
  return `#!/bin/sh
# opkit-database-operator: the primary lease (renew it, or fence this instance).
set -u
: "\${POD_NAME:?}" "\${POD_NAMESPACE:?}" "\${LEASE_NAME:?}" "\${LEASE_SECONDS:?}" "\${PGDATA:?}" "\${LEASE_TOKEN_DIR:?}"
interval=\${LEASE_INTERVAL:-${LEASE_INTERVAL_SECONDS}}
slack=\${LEASE_SLACK:-${LEASE_SLACK_SECONDS}}
renewed_file=\${RENEWED_FILE:-${LEASE_RENEWED_FILE}}
stop_seconds=\${FENCE_STOP_SECONDS:-3}
user=\${POSTGRES_USER:-postgres}
api="https://\${KUBERNETES_SERVICE_HOST:-kubernetes.default.svc}:\${KUBERNETES_SERVICE_PORT:-443}"
url="$api/apis/coordination.k8s.io/v1/namespaces/$POD_NAMESPACE/leases/$LEASE_NAME"
log() { printf 'lease: %s\\n' "$*" >&2; }
${designationShell()}

if ! command -v curl >/dev/null 2>&1; then
  log "no curl in this image: the primary lease is not renewed (the operator falls back to the node and pod conditions)"
  exec sleep 2147483647
fi

uptime_s() { cut -d. -f1 /proc/uptime; }
# curl against the API with the projected token (re-read each time: the kubelet rotates it).
kube() {
  curl -sS --max-time 2 --cacert "$LEASE_TOKEN_DIR/ca.crt" -A opkit-lease \\
    -H "Authorization: Bearer $(cat "$LEASE_TOKEN_DIR/token" 2>/dev/null)" -H 'Accept: application/json' "$@"
}
# A JSON string field of the Lease: names and RFC 3339 times hold no quotes. The API server pretty-prints
# for a curl user agent (hence -A above); spaces and new lines are tolerated all the same.
field() { tr -d '\\n' | sed -n "s/.*\\"$1\\": *\\"\\([^\\"]*\\)\\".*/\\1/p"; }
writable() {
  [ "$(psql -X -A -t -q -w -U "$user" -d postgres -c 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ]
}
now_rfc3339() { date -u +%Y-%m-%dT%H:%M:%S.000000Z; }

fence() {
  log "FENCING $POD_NAME: $1"
  set -- $(designation)
  if [ "\${1:-}" = "$POD_NAME" ]; then
    mkdir -p "$(dirname "$designation_file")" && printf '%s %s\\n' "$fenced" "\${2:-0}" >"$designation_file.new" &&
      mv -f "$designation_file.new" "$designation_file"
  fi
  if pg_ctl status -D "$PGDATA" >/dev/null 2>&1; then
    pg_ctl stop -D "$PGDATA" -m fast -w -t "$stop_seconds" >&2 ||
      pg_ctl stop -D "$PGDATA" -m immediate -w -t 10 >&2 || log "stopping the server failed"
  fi
  # The acknowledgement: only on the Lease as read now (a 409 means it changed: the next pass sees it).
  body=$(kube "$url") || return 0
  rv=$(printf '%s' "$body" | field resourceVersion)
  holder=$(printf '%s' "$body" | field holderIdentity)
  [ -n "$rv" ] && [ "$holder" != "$POD_NAME" ] || return 0
  kube -X PATCH -H 'Content-Type: application/merge-patch+json' \\
    -d "{\\"metadata\\":{\\"resourceVersion\\":\\"$rv\\",\\"annotations\\":{\\"${LEASE_FENCED_ANNOTATION}\\":\\"$POD_NAME\\"}}}" \\
    "$url" >/dev/null && log "fenced: acknowledged on the Lease"
}

# What the last pass found, so each change of state is logged once (not every 2 s).
state=''
say() {
  [ "$1" = "$state" ] && return 0
  state=$1
  shift
  log "$*"
}

pass() {
  writable || { state=''; return 0; }
  last=$(cat "$renewed_file" 2>/dev/null || true)
  body=$(kube "$url" 2>&1) || true
  rv=$(printf '%s' "$body" | field resourceVersion)
  if [ -n "$rv" ] && printf '%s' "$body" | tr -d '\\n ' | grep -q '"${LEASE_OFF_ANNOTATION}":"true"'; then
    rm -f "$renewed_file"
    say off "the Lease $LEASE_NAME is off (one instance): neither renewing nor fencing"
    return 0
  fi
  if [ -n "$rv" ]; then
    holder=$(printf '%s' "$body" | field holderIdentity)
    if [ "$holder" != "$POD_NAME" ]; then
      fence "the Lease $LEASE_NAME names \${holder:-nobody} as the primary"
      return 0
    fi
    answer=$(kube -X PATCH -H 'Content-Type: application/merge-patch+json' \
      -d "{\\"metadata\\":{\\"resourceVersion\\":\\"$rv\\"},\\"spec\\":{\\"renewTime\\":\\"$(now_rfc3339)\\"}}" \
      "$url" 2>&1) || true
    if [ -n "$(printf '%s' "$answer" | field holderIdentity)" ]; then
      uptime_s >"$renewed_file.new" && mv -f "$renewed_file.new" "$renewed_file"
      say renewing "renewing the Lease $LEASE_NAME as its holder"
      return 0
    fi
    say failing "renewing the Lease $LEASE_NAME failed: $(printf '%s' "$answer" | head -c 300)"
  else
    say failing "reading the Lease $LEASE_NAME failed: $(printf '%s' "$body" | head -c 300)"
  fi
  [ -n "$last" ] || return 0
  age=$(($(uptime_s) - last))
  if [ "$age" -ge $((LEASE_SECONDS - slack)) ]; then
    fence "the Lease $LEASE_NAME was last renewed \${age}s ago (LEASE_SECONDS $LEASE_SECONDS)"
  fi
}

trap 'exit 0' TERM INT
while :; do
  pass
  sleep "$interval" &
  wait $!
done
`;
}
