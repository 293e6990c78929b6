#!/usr/bin/env bash
# One lane of `make test`: runs a command with the lane's name before every
# line it prints, so lanes running side by side can be read apart, then says
# how the lane ended and how long it took; exits with the command's status.
#   hack/lane.sh NAME COMMAND...
set -uo pipefail
name=$1
shift
"$@" 2>&1 | while IFS= read -r line; do printf '%-10s | %s\n' "$name" "$line"; done
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ]; then verdict=passed; else verdict="FAILED (exit $status)"; fi
printf '%-10s | lane %s: %s in %ss\n' "$name" "$name" "$verdict" "$SECONDS"
exit "$status"
