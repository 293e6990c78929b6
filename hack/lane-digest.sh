#!/usr/bin/env bash
# What failed in `make test`, printed last: the lanes run side by side and a
# failed one goes on printing (a cluster's state, its components' logs) while
# the others finish, so the lines that say what failed end up far from the
# end of the output, where a reader of a CI log starts. For each step or lane
# hack/lane.sh marked failed: pytest's summary lines, the scripts' own
# "FAILED:" lines and make's errors, then the first LINES assertion lines,
# then the CONTEXT lines printed just before make's first error: a script
# that failed without a "FAILED:" line of its own said why there.
#   hack/lane-digest.sh [LOG_DIR]   (default: build/lanes)
#   LANE_DIGEST_LINES (40), LANE_DIGEST_CONTEXT (15)
set -uo pipefail
logs=${1:-${LANE_LOG_DIR:-build/lanes}}
lines=${LANE_DIGEST_LINES:-40}
context=${LANE_DIGEST_CONTEXT:-15}
make_error='\*\*\* .* Error [0-9]+'
shopt -s nullglob
for marker in "$logs"/*.failed; do
  name=$(basename "$marker" .failed)
  log="$logs/$name.log"
  echo "==== what failed in $name (its whole output: $log) ===="
  grep -E "^(FAILED|ERROR) |FAILED: |$make_error" "$log"
  grep -E '^E +' "$log" | head -n "$lines"
  first=$(grep -n -m1 -E "$make_error" "$log" | cut -d: -f1)
  if [ -n "$first" ] && [ "$first" -gt 1 ]; then
    echo "---- the lines before make's first error ----"
    head -n "$((first - 1))" "$log" | tail -n "$context"
  fi
done
