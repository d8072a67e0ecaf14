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
