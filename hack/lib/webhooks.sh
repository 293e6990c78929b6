# Sourced by the kind scripts: runs a kubectl command an admission webhook
# must answer, again every 2 s while it does not, for up to SECONDS. A
# manager's pod can be Ready before its webhook Service routes to it, or be
# restarting on a loaded machine; any other refusal is final.
#   while_webhooks_refuse SECONDS PATTERN COMMAND...
# PATTERN (grep -E) adds refusals to wait out besides "failed calling
# webhook" ("" for none). Prints the command's output; returns 0 once it
# succeeds, else 1 with the last refusal on stderr.
while_webhooks_refuse() {
  local seconds=$1 pattern="failed calling webhook" out start=$SECONDS
  [ -z "$2" ] || pattern="$pattern|$2"
  shift 2
  while :; do
    if out=$("$@" 2>&1); then
      printf '%s\n' "$out"
      return 0
    fi
    if ! grep -qE "$pattern" <<<"$out"; then
      printf '%s: %s\n' "$1" "$out" >&2
      return 1
    fi
    if [ $((SECONDS - start)) -ge "$seconds" ]; then
      printf 'webhooks did not answer in %d s: %s\n' "$seconds" "$out" >&2
      return 1
    fi
    sleep 2
  done
}
