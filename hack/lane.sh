#!/usr/bin/env bash
# One lane of `make test`, or one of its set-up steps: runs a command with the
# name before every line it prints, so steps running side by side can be read
# apart, then says how it ended and how long it took (the first-test benchmark
# reads that line); exits with the command's status. The lines also go, as
# printed, to $LANE_LOG_DIR/NAME.log, and a failure leaves NAME.failed beside
# it for hack/lane-digest.sh.
#   hack/lane.sh lane|set-up NAME COMMAND...
set -uo pipefail
kind=$1
name=$2
shift 2
logs=${LANE_LOG_DIR:-build/lanes}
mkdir -p "$logs"
rm -f "$logs/$name.failed"
"$@" 2>&1 | tee "$logs/$name.log" | while IFS= read -r line; do printf '%-17s | %s\n' "$name" "$line"; done
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ]; then
  verdict=passed
else
  verdict="FAILED (exit $status)"
  touch "$logs/$name.failed"
fi
printf '%-17s | %s %s: %s in %ss\n' "$name" "$kind" "$name" "$verdict" "$SECONDS"
exit "$status"
