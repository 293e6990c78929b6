# Sourced by the kind scripts: runs a command up to four times, waiting 10,
# 20 and then 30 s between attempts, for steps that podman or a node's
# containerd may refuse for a while on a loaded machine and take later.
#   retry WHAT COMMAND...
# WHAT names the step in the messages (stderr); returns the command's last
# status.
retry() {
  local what=$1 attempt status
  shift
  for attempt in 1 2 3 4; do
    "$@" && return 0
    status=$?
    [ "$attempt" -lt 4 ] || return "$status"
    echo "$what failed (attempt $attempt, exit $status); trying again in $((10 * attempt))s" >&2
    sleep "$((10 * attempt))"
  done
}
