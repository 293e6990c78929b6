"""Which workload each node belongs to, as AWS's Neuron UltraServer operator
records it (AWS profile): every NeuronUltraServer's `status.allocations` lists
`{workload, workloadId, nodes}`, and the controller publishes that workloadId
as the attribute `workloadId` on every device of those nodes
(driver/devicemodel/awsprofile.py). The node daemon then refuses a claim
whose `neuron.aws.com/workload-id` label does not match it.

Pure: NeuronUltraServer objects in, node -> workloadId out. A node the
objects do not say clearly (two workloads, an id no ResourceSlice can carry)
gets no tag, and the reason is returned for the log.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from driver.devicemodel.awsprofile import AWS_DRIVER, MAX_WORKLOAD_ID
from driver.kubeapi.resources import Resource

NEURON_ULTRASERVERS: Final = Resource(AWS_DRIVER, "v1", "neuronultraservers")
"""The operator's NeuronUltraServers (namespaced; listed in all namespaces)."""


@dataclass(frozen=True)
class WorkloadAllocation:
    """One entry of a NeuronUltraServer's `status.allocations`."""

    workload: str
    """namespace/name of the NeuronUltraServerWorkload."""
    workload_id: str
    """"" when the entry has none (or not a string)."""
    nodes: tuple[str, ...]


Allocations = tuple[WorkloadAllocation, ...]


def allocations_of(obj: Mapping[str, Any]) -> Allocations:
    """A NeuronUltraServer's `status.allocations` (what the controller's store
    keeps of it): entries that are not objects and node names that are not
    strings are left out."""
    found = ((obj.get("status") or {}).get("allocations")) or []
    if not isinstance(found, list):
        return ()
    out = []
    for entry in found:
        if not isinstance(entry, Mapping):
            continue
        workload, workload_id = entry.get("workload"), entry.get("workloadId")
        nodes = entry.get("nodes")
        out.append(
            WorkloadAllocation(
                workload=workload if isinstance(workload, str) else "",
                workload_id=workload_id if isinstance(workload_id, str) else "",
                nodes=tuple(n for n in nodes if isinstance(n, str) and n)
                if isinstance(nodes, list)
                else (),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class WorkloadTags:
    nodes: Mapping[str, str]
    """node name -> workloadId, for every node to tag."""
    problems: tuple[str, ...] = ()
    """Why some listed nodes get no tag, one sentence each."""


def node_workloads(objects: Mapping[str, Allocations]) -> WorkloadTags:
    """node -> workloadId over every NeuronUltraServer (keyed namespace/name).
    A node appears in one allocation at most (the operator's contract); one
    named with two different workloadIds gets no tag, and so does a node whose
    allocation has no workloadId or one longer than a ResourceSlice attribute
    takes (64 characters)."""
    seen: dict[str, tuple[str, str]] = {}  # node -> (workloadId, workload)
    clashes: dict[str, set[tuple[str, str]]] = {}
    problems: list[str] = []
    for key in sorted(objects):
        for entry in objects[key]:
            label = entry.workload or "(unnamed)"
            if not entry.workload_id:
                problems.append(
                    f"NeuronUltraServer {key}: the allocation of workload {label} has no "
                    f"workloadId; its nodes {', '.join(entry.nodes)} are not tagged"
                )
                continue
            if len(entry.workload_id) > MAX_WORKLOAD_ID:
                problems.append(
                    f"NeuronUltraServer {key}: workloadId {entry.workload_id!r} of workload "
                    f"{label} is longer than the {MAX_WORKLOAD_ID} characters a ResourceSlice "
                    f"attribute takes; its nodes {', '.join(entry.nodes)} are not tagged"
                )
                continue
            for node in entry.nodes:
                mine = (entry.workload_id, label)
                other = seen.setdefault(node, mine)
                if other[0] != mine[0]:
                    clashes.setdefault(node, {other}).add(mine)
    for node, owners in sorted(clashes.items()):
        seen.pop(node, None)
        named = ", ".join(f"{workload} ({wid})" for wid, workload in sorted(owners))
        problems.append(
            f"node {node} is allocated to more than one workload: {named}; a node belongs "
            "to one workload at most, so its devices are not tagged"
        )
    return WorkloadTags({node: wid for node, (wid, _) in seen.items()}, tuple(problems))


def nodes_named(allocations: Iterable[Allocations | None]) -> set[str]:
    """Every node the given projections name: the nodes whose tags a change of
    those NeuronUltraServers may move."""
    return {node for found in allocations if found for entry in found for node in entry.nodes}


def rack_tags(tags: Mapping[str, str], nodes: Iterable[str]) -> dict[str, str]:
    """The tags of one rack's nodes."""
    return {node: tags[node] for node in nodes if node in tags}
