"""Why a node cannot run a workload now, from what the operator reads. Pure.

A node is unhealthy, first reason first, when
- its Node is not Ready (False or Unknown: the kubelet stopped posting) or is
  tainted unreachable;
- its node daemon is silent: its heartbeat Lease (driver/node/heartbeat.py)
  was not renewed within its duration (the daemon was killed or hangs);
- its devices are no longer published: a node its NeuronUltraServer lists,
  whose Node is still there, has no device in the driver's ResourceSlices;
- a device of it is tainted NoSchedule or NoExecute (a failed chip, a chip
  whose NeuronLinks are down).
"""

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

UNPUBLISHED = "its devices are no longer published (its ResourceSlices are gone)"


def node_problem(node: Mapping[str, Any] | None) -> str:
    if node is None:
        return "the Node object is gone"
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") != "True":
            return (
                f"node NotReady (Ready {condition.get('status')}, "
                f"{condition.get('reason') or 'no reason given'})"
            )
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("key") == "node.kubernetes.io/unreachable":
            return "node unreachable"
    return ""


def device_problem(device: Mapping[str, Any]) -> str:
    hard = [t for t in device.get("taints") or [] if t.get("effect") != "PreferNoSchedule"]
    if not hard:
        return ""
    return f"device {device['name']} tainted {hard[0].get('key')}={hard[0].get('value', '')}"


def _stamp(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def silent_daemons(leases: Iterable[Mapping[str, Any]], now: datetime.datetime) -> dict[str, str]:
    """node -> why its daemon counts as stopped, for each heartbeat Lease past its duration."""
    out = {}
    for lease in leases:
        spec = lease.get("spec") or {}
        node, renewed = spec.get("holderIdentity"), spec.get("renewTime")
        duration = spec.get("leaseDurationSeconds")
        if not node or not renewed or not duration:
            continue
        if (now - _stamp(str(renewed))).total_seconds() > float(duration):
            out[str(node)] = (
                f"node daemon silent since {str(renewed)[:19]}Z "
                f"(its heartbeat Lease lasts {duration} s)"
            )
    return out


def next_expiry(leases: Iterable[Mapping[str, Any]], now: datetime.datetime) -> float | None:
    """Seconds until the first live heartbeat Lease runs out: when a pass must look again."""
    left = []
    for lease in leases:
        spec = lease.get("spec") or {}
        renewed, duration = spec.get("renewTime"), spec.get("leaseDurationSeconds")
        if renewed and duration:
            remaining = float(duration) - (now - _stamp(str(renewed))).total_seconds()
            if remaining >= 0:
                left.append(remaining)
    return min(left) if left else None
