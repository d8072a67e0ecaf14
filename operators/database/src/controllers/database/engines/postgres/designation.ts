/**
 * Who the primary is, as the scripts in a pod see it. Three sources, from the oldest to the freshest:
 *   - env PRIMARY_POD: the ConfigMap's value when the container started;
 *   - the ConfigMap's mounted copy (PRIMARY_FILE, with its epoch in PRIMARY_EPOCH_FILE), which the kubelet
 *     updates in place within its sync period (10 s on opkit's local kubelets, about a minute on real
 *     clusters);
 *   - the operator's designation file (DESIGNATION_FILE, on the pod's in-memory volume: `<pod> <epoch>`),
 *     written through pods/exec the moment the operator fences or promotes.
 * The epoch (status.primaryEpoch) grows with every change of designation (fenced, promoted), so a mount
 * the kubelet refreshes late, in the middle of a failover, never overrides a newer designation: the file
 * with the higher epoch wins, the operator's on a tie. `none` (FENCED_PRIMARY) means a failover is in
 * progress: nobody is the primary.
 */
import { CLUSTER_KEYS, CONFIG_DIR } from '../../desired/names.ts';
import { FENCED_PRIMARY, POSTGRES_DESIGNATION_FILE } from './failover.ts';

/**
 * Shell: `designation [NEWER_THAN]` prints `<pod> <epoch>` from the files (nothing when neither exists;
 * with NEWER_THAN, only a file modified after that one counts). Needs nothing but POSIX sh.
 */
export function designationShell(): string {
  return `fenced=${FENCED_PRIMARY}
designation_file=\${DESIGNATION_FILE:-${POSTGRES_DESIGNATION_FILE}}
primary_file=\${PRIMARY_FILE:-${CONFIG_DIR}/${CLUSTER_KEYS.primary}}
primary_epoch_file=\${PRIMARY_EPOCH_FILE:-${CONFIG_DIR}/${CLUSTER_KEYS.epoch}}
designation() {
  d_best='' d_best_epoch=-1
  if [ -s "$primary_file" ] && { [ -z "\${1:-}" ] || [ "$primary_file" -nt "$1" ]; }; then
    d_best=$(head -n1 "$primary_file")
    d_best_epoch=$(head -n1 "$primary_epoch_file" 2>/dev/null || true)
    case "$d_best_epoch" in '' | *[!0-9]*) d_best_epoch=0 ;; esac
  fi
  if [ -s "$designation_file" ] && { [ -z "\${1:-}" ] || [ "$designation_file" -nt "$1" ]; }; then
    read -r d_pod d_epoch <"$designation_file" || true
    case "\${d_epoch:-}" in '' | *[!0-9]*) d_epoch=0 ;; esac
    if [ -n "\${d_pod:-}" ] && [ "$d_epoch" -ge "$d_best_epoch" ]; then d_best=$d_pod d_best_epoch=$d_epoch; fi
  fi
  [ -z "$d_best" ] || printf '%s %s\\n' "$d_best" "$d_best_epoch"
}`;
}

/**
 * Shell: `wait_designation MESSAGE`, while a failover is pending: waits for the operator to name the new
 * primary, then sets PRIMARY_POD (and PRIMARY_HOST's pod part) to it; after FENCE_WAIT_SECONDS it calls
 * `refuse <fencedResult> ...`. Needs designation(), log, refuse, POD_NAME, PRIMARY_HOST, fence_wait_seconds.
 *
 * A designation counts when it is newer than the wait (a file modified since), or, when the operator fenced
 * this pod (its designation file says `none <epoch>`), when its epoch is higher than that fence's: the
 * kubelet may have put the new primary in the ConfigMap's mount just before the wait began, and a
 * switchover in CI waited out FENCE_WAIT_SECONDS (10 minutes) on such a mount.
 */
export function waitDesignationShell(fencedResult: string): string {
  return `wait_designation() {
  marker="$(dirname "$designation_file")/fence-wait"
  mkdir -p "$(dirname "$marker")" && : >"$marker" || marker=''
  fence_epoch=''
  if [ -s "$designation_file" ]; then
    read -r w_pod w_epoch <"$designation_file" || true
    case "\${w_epoch:-}" in '' | *[!0-9]*) ;; *) [ "\${w_pod:-}" != "$fenced" ] || fence_epoch=$w_epoch ;; esac
  fi
  log "$1: waiting for the operator to name the primary"
  waited=0
  while :; do
    set -- $(designation "$marker")
    if { [ -z "\${1:-}" ] || [ "$1" = "$fenced" ]; } && [ -n "$fence_epoch" ]; then
      set -- $(designation)
      { [ -n "\${2:-}" ] && [ "$2" -gt "$fence_epoch" ]; } || set --
    fi
    if [ -n "\${1:-}" ] && [ "$1" != "$fenced" ]; then
      PRIMARY_HOST="$1.\${PRIMARY_HOST#*.}"
      PRIMARY_POD=$1
      log "the primary is $PRIMARY_POD"
      return 0
    fi
    if [ "$waited" -ge "$fence_wait_seconds" ]; then
      refuse ${fencedResult} "$POD_NAME is fenced: a failover is in progress and no primary was named within \${fence_wait_seconds}s"
    fi
    sleep 2
    waited=$((waited + 2))
  done
}`;
}
