"""Whether a claim may use devices that AWS's UltraServer operator allocated to
a workload (AWS profile): pure, the claim's label and the devices' published
attributes in, a refusal or nothing out.

The controller tags every device of a node the operator allocated with the
allocation's `workloadId`; the operator's ResourceClaimTemplate labels each
claim of the workload `neuron.aws.com/workload-id: <that id>`. A claim is
prepared only when the two agree on every Neuron device of it on this node
(chips and node devices): a tagged device needs the claim of its workload,
and a labelled claim needs devices of its workload. Claims and devices
without either prepare as before.

EFA interfaces carry the tag too (a claim may select by it) but are not
checked: AWS's UltraServer workloads take their nodes' EFA interfaces with a
ResourceClaimTemplate of their own, whose claims have no workload label (on
EKS those devices are another driver's, which knows nothing of workloads).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from driver.devicemodel import attributes as attr
from driver.devicemodel.awsprofile import (
    NEURON_DEVICE,
    NEURON_NODE,
    WORKLOAD_ID_ATTRIBUTE,
    WORKLOAD_ID_LABEL,
)
from driver.devicemodel.devicecores import AllocationError, Attributes

FIELD = f'metadata.labels["{WORKLOAD_ID_LABEL}"]'
SHOWN_DEVICES = 3
"""Devices a refusal names before it counts the rest."""
CHECKED_KINDS = (NEURON_DEVICE, NEURON_NODE)
"""The devices whose workloadId must match the claim's label: not EFA interfaces."""


class WorkloadMismatchError(AllocationError):
    """The claim's workload label and its devices' workloadId disagree."""


@dataclass(frozen=True)
class ClaimDevice:
    """One device of the claim on this node, with its published attributes."""

    pool: str
    device: str
    attributes: Attributes


def workload_label(claim: Mapping[str, Any]) -> str | None:
    """The claim's `neuron.aws.com/workload-id` label; None when absent or empty."""
    labels = (claim.get("metadata") or {}).get("labels") or {}
    value = labels.get(WORKLOAD_ID_LABEL)
    return str(value) if value else None


def device_workload(attributes: Attributes) -> str | None:
    """The device's published `workloadId`; None when it carries none."""
    value = attributes.get(WORKLOAD_ID_ATTRIBUTE)
    return str(value) if value else None


def _names(devices: Sequence[ClaimDevice]) -> str:
    shown = ", ".join(repr(d.device) for d in devices[:SHOWN_DEVICES])
    more = len(devices) - SHOWN_DEVICES
    return f"{shown} and {more} more" if more > 0 else shown


def workload_refusal(
    claim: Mapping[str, Any], devices: Sequence[ClaimDevice], node: str
) -> str | None:
    """Why the claim may not use these devices of `node`, or None when it may
    (EFA interfaces are not looked at). The message names the devices, the
    node, the workload they belong to and the fix; it starts with the field at
    fault, the claim's label."""
    label = workload_label(claim)
    by_owner: dict[str | None, list[ClaimDevice]] = {}
    for device in devices:
        if device.attributes.get(attr.KIND) not in CHECKED_KINDS:
            continue
        owner = device_workload(device.attributes)
        if owner != label:
            by_owner.setdefault(owner, []).append(device)
    if not by_owner:
        return None
    owner = sorted(by_owner, key=lambda o: (o is None, o or ""))[0]
    wrong = by_owner[owner]
    device_word, belong = ("device", "belongs") if len(wrong) == 1 else ("devices", "belong")
    if owner is None:
        assert label is not None
        return (
            f"{FIELD}: the claim belongs to the UltraServer workload with workloadId "
            f'"{label}", but {device_word} {_names(wrong)} of node {node} {belong} to no '
            "workload, and a workload's claims take only the devices of the nodes the "
            f"operator allocated to it; {_template(label)}"
        )
    if label is None:
        return (
            f"{FIELD}: {device_word} {_names(wrong)} of node {node} {belong} to the UltraServer "
            f'workload with workloadId "{owner}", and this claim has no {WORKLOAD_ID_LABEL} '
            f"label; to run in that workload, {_template(owner)}, or else claim devices of "
            "a node no workload holds"
        )
    return (
        f"{FIELD}: {device_word} {_names(wrong)} of node {node} {belong} to the UltraServer "
        f'workload with workloadId "{owner}", but this claim belongs to workload "{label}"; '
        f'to run in workload "{owner}", {_template(owner)}'
    )


def _template(workload_id: str) -> str:
    return (
        "use the ResourceClaimTemplate the UltraServer operator generated for that workload "
        f"(its claims carry the label {WORKLOAD_ID_LABEL}={workload_id} and select the "
        "workload's devices)"
    )


def check_workload(claim: Mapping[str, Any], devices: Sequence[ClaimDevice], node: str) -> None:
    """Raise WorkloadMismatchError (before anything is written) when
    `workload_refusal` refuses the claim."""
    refusal = workload_refusal(claim, devices, node)
    if refusal is not None:
        raise WorkloadMismatchError(refusal)
