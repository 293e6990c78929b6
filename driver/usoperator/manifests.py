"""The objects the operator writes, as functions of its decisions: the
ResourceClaimTemplate of a workload, the status of a workload and of a
NeuronUltraServer. Pure."""

from collections.abc import Mapping, Sequence
from typing import Any

from driver.devicemodel.awsprofile import (
    AWS_CONFIG_API,
    NEURON_NODE,
    WORKLOAD_ID_ATTRIBUTE,
    WORKLOAD_ID_LABEL,
)
from driver.devicemodel.profiles import NEURON_CONFIG, ULTRASERVER_CONFIG
from driver.jsontypes import JSON
from driver.usoperator.allocate import Decision, free_groups
from driver.usoperator.model import Held, UltraServer, Workload
from driver.usoperator.names import (
    GROUP,
    MANAGED_BY,
    MANAGED_LABEL,
    TOPOLOGY_SIZES,
    VERSION,
)

REQUEST = "neurons"


def claim_template(w: Workload, driver: str) -> JSON:
    """One `neuron_node` device per claim, of a node tagged with the workload's
    id: a pod that takes a claim from it lands on one of the workload's nodes
    and on no other. The label goes onto every claim made from it."""
    attrs = f"device.attributes['{driver}']"
    selector = (
        f"{attrs}.resourceType == '{NEURON_NODE}' && '{WORKLOAD_ID_ATTRIBUTE}' in {attrs} && "
        f"{attrs}.{WORKLOAD_ID_ATTRIBUTE} == '{w.workload_id}'"
    )
    configs: list[JSON] = [
        _config(driver, {"kind": ULTRASERVER_CONFIG, "ultraserverMode": w.topology_size})
    ]
    if w.lnc is not None:
        configs.append(_config(driver, {"kind": NEURON_CONFIG, "logicalNeuronCore": w.lnc}))
    labels = {WORKLOAD_ID_LABEL: w.workload_id}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": w.template,
            "namespace": w.namespace,
            "labels": {**labels, MANAGED_LABEL: MANAGED_BY},
            "ownerReferences": [_owner(w)],
        },
        "spec": {
            "metadata": {"labels": labels},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": REQUEST,
                            "exactly": {
                                "deviceClassName": driver,
                                "selectors": [{"cel": {"expression": selector}}],
                                "allocationMode": "ExactCount",
                                "count": 1,
                            },
                        }
                    ],
                    "config": configs,
                }
            },
        },
    }


def _config(driver: str, parameters: Mapping[str, Any]) -> JSON:
    return {
        "requests": [REQUEST],
        "opaque": {"driver": driver, "parameters": {"apiVersion": AWS_CONFIG_API, **parameters}},
    }


def _owner(w: Workload) -> JSON:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NeuronUltraServerWorkload",
        "name": w.name,
        "uid": w.uid,
        "controller": True,
    }


def workload_status(d: Decision, now: str) -> JSON:
    """The status AWS documents (state, allocatedUltraServers, workloadId,
    totalNodesAllocated, allocationTime) plus this project's: why, which nodes,
    and the last failure with when it was seen and when it was recovered from."""
    old = d.workload.status
    nodes = list(d.nodes)
    allocated = d.state == "Allocated"
    same_nodes = old.get("nodes") == nodes
    status: JSON = {
        "state": d.state,
        "reason": d.reason,
        "message": d.message,
        "workloadId": d.workload.workload_id,
        "resourceClaimTemplate": d.workload.template,
        "allocatedUltraServers": sorted(h.ultraserver for h in d.held),
        "nodes": nodes,
        "totalNodesAllocated": len(nodes),
        "allocationTime": (
            old.get("allocationTime")
            if allocated and same_nodes and old.get("allocationTime")
            else now
            if allocated
            else None
        ),
        "restartedAt": now if d.restarted else old.get("restartedAt"),
        "lastFailure": _last_failure(d, now),
    }
    return status


def _last_failure(d: Decision, now: str) -> JSON | None:
    old: Mapping[str, Any] | None = d.workload.status.get("lastFailure")
    failed = sorted(d.failed_nodes)
    if failed and (d.restarted or d.replaced or not old or old.get("nodes") != failed):
        return {
            "nodes": failed,
            "strategy": d.workload.strategy,
            "detectedAt": now,
            "reallocatedAt": now
            if d.state == "Allocated" and d.workload.strategy != "NoOp"
            else None,
        }
    if old and not old.get("reallocatedAt") and d.state == "Allocated" and d.reason != "Degraded":
        return {**old, "reallocatedAt": now}
    return dict(old) if old else None


def ultraserver_object(us: UltraServer, namespace: str) -> JSON:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NeuronUltraServer",
        "metadata": {
            "name": us.id,
            "namespace": namespace,
            "labels": {MANAGED_LABEL: MANAGED_BY},
        },
        "spec": {
            "ultraServerId": us.id,
            "instanceType": us.instance_type,
            "nodes": [m.name for m in us.nodes],
        },
    }


def ultraserver_status(
    us: UltraServer, held: Sequence[Held], old: Mapping[str, Any], now: str
) -> JSON:
    """Its nodes and their health, what each workload holds, how many more
    groups of each size are free, `Ready` or `Degraded` and why."""
    mine = [h for h in held if h.ultraserver == us.id]
    taken = {n for h in held for n in h.nodes}
    used = {n for h in mine for n in h.nodes}
    health = "Ready" if us.healthy else "Degraded"
    problems = [f"{m.name}: {m.problem}" for m in us.nodes if m.problem]
    state = (
        "Available"
        if not used
        else "FullyAllocated"
        if len(used) == len(us.nodes)
        else "PartiallyAllocated"
    )
    return {
        "state": state,
        "health": health,
        "message": "; ".join(problems) or f"all {len(us.nodes)} nodes healthy",
        "healthChangedAt": old.get("healthChangedAt") if old.get("health") == health else now,
        "nodeCount": len(us.nodes),
        "nodes": [
            {"name": m.name, "healthy": m.healthy, "problem": m.problem or None, "busy": m.busy}
            for m in us.nodes
        ],
        "availableConfigurations": [
            {"topologySize": size, "free": len(free_groups(us, size, taken))}
            for size in TOPOLOGY_SIZES
        ],
        "allocations": [
            {"workload": h.workload, "workloadId": h.workload_id, "nodes": list(h.nodes)}
            for h in sorted(mine, key=lambda h: h.workload)
        ],
    }
