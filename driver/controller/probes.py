"""Liveness and readiness of a controller replica, as a pure function of its state.

Live: a leader's lease, worker and resync threads are all running (a standby
has none yet). Ready: a standby whose last Lease attempt reached the
apiserver, or a leader whose stores are primed — either can do its job.
"""

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

Role = Literal["starting", "standby", "leader"]


@dataclass(frozen=True)
class ReplicaState:
    role: Role
    primed: bool
    dead_threads: Collection[str]
    apiserver_error: str  # "" when the last Lease attempt got an answer


def report(state: ReplicaState, need_ready: bool) -> tuple[bool, dict[str, Any]]:
    """(ok, details) for /healthz (need_ready False) or /readyz."""
    problems: list[str] = []
    if state.dead_threads:
        problems.append(f"threads stopped: {', '.join(sorted(state.dead_threads))}")
    if need_ready:
        if state.role == "starting":
            problems.append("has not tried the Lease yet")
        elif state.role == "standby" and state.apiserver_error:
            problems.append(f"cannot reach the apiserver: {state.apiserver_error}")
        elif state.role == "leader" and not state.primed:
            problems.append("leader still listing nodes, health reports, claims and racks")
    return not problems, {"role": state.role, "problems": problems}
