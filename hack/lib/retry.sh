# Sourced by the kind scripts: runs a command up to three times, 5 s apart,
# for steps that podman or a node's containerd may refuse for a moment on a
# loaded machine and take a moment later.
#   retry WHAT COMMAND...
# WHAT names the step in the messages (stderr); returns the command's last
# status.
retry() {
  local what=$1 attempt status
  shift
  for attempt in 1 2 3; do
    "$@" && return 0
    status=$?
    [ "$attempt" -lt 3 ] || return "$status"
    echo "$what failed (attempt $attempt); trying again" >&2
    sleep 5
  done
}
