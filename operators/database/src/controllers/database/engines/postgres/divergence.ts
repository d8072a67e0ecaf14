/**
 * The re-clone safety net's shared shell (issue 12): a replica whose replay stays on one position while
 * its primary is up cannot follow it (its WAL diverged: "incorrect prev-link", "requested starting point
 * ... is ahead of the WAL flush position", "timeline N of the primary does not match", a new timeline
 * forked off before its recovery point). Restarting it as it is changes nothing, so:
 *   - health.sh's liveness tracks the replay position (`stuck_file`: `<since> <position>`) and, once it has
 *     not moved for STUCK_SECONDS (default 120) while the primary is up and replay is not paused, leaves a
 *     verdict (`diverged_file`: `<position> <seconds> <why>`) and fails;
 *   - the next `instance.sh start` (instance.ts) reads the verdict: pg_rewind when it applies and was not
 *     tried for this verdict yet (`rewound_file`), else a fresh clone of the designated primary, the old
 *     data directory kept aside when the volume has room.
 * The files live next to the operator's designation file, on the pod's in-memory volume: they survive a
 * restart of the container, not of the pod. A replica that streams and replays clears them.
 */

/**
 * Shell (after designationShell()): the files, `stuck POSITION WHY`, `startup_position` and `healthy`.
 * Needs PRIMARY_POD.
 */
export function stuckShell(): string {
  return `opkit_run_dir=$(dirname "$designation_file")
stuck_file=$opkit_run_dir/stuck
diverged_file=$opkit_run_dir/diverged
rewound_file=$opkit_run_dir/diverged-rewound
stuck_seconds=\${STUCK_SECONDS:-120}
# True once replay has stayed on POSITION for stuck_seconds (the caller checked that the primary is up);
# then the verdict is left for the next start, and said.
stuck() {
  s_now=$(date +%s)
  s_since='' s_pos=''
  if [ -s "$stuck_file" ]; then read -r s_since s_pos _ <"$stuck_file" || true; fi
  case "$s_since" in '' | *[!0-9]*) s_since='' ;; esac
  if [ -z "$s_since" ] || [ "$s_pos" != "$1" ]; then
    printf '%s %s\\n' "$s_now" "$1" >"$stuck_file" 2>/dev/null || true
    return 1
  fi
  s_for=$((s_now - s_since))
  [ "$s_for" -ge "$stuck_seconds" ] || return 1
  printf '%s %s %s\\n' "$1" "$s_for" "$2" >"$diverged_file" 2>/dev/null || true
  echo "replay stuck at $1 for \${s_for}s while the primary $PRIMARY_POD is up ($2): the restart repairs it (pg_rewind, else a fresh clone of $PRIMARY_POD)"
  return 0
}
# The WAL segment in the startup process's title among the postmaster's children ("recovering
# 000000010000000000000003", "waiting for ..."): where replay is while the server does not answer
# queries. Needs PGDATA and /proc.
startup_position() {
  s_pm=$(head -n1 "$PGDATA/postmaster.pid" 2>/dev/null) || return 0
  for s_proc in /proc/[0-9]*; do
    read -r _ _ _ s_ppid _ 2>/dev/null <"$s_proc/stat" || continue
    [ "$s_ppid" = "$s_pm" ] || continue
    s_title=$(tr '\\0' ' ' 2>/dev/null <"$s_proc/cmdline") || continue
    case $s_title in
      *'startup '*) printf '%s\\n' "$s_title" | sed 's/ *$//; s/.* //'; return 0 ;;
    esac
  done
}
healthy() { rm -f "$stuck_file" "$diverged_file" "$rewound_file" 2>/dev/null || true; }`;
}
