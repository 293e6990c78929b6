"""Small hand-written ResourceSlices and claims in the controller's attribute scheme."""

from typing import Any

from simdevice.topology import rack_spec

DRIVER = "trainium.sim.dev"
RACK = rack_spec("trn3-gen2")


def device(name: str, **attrs: Any) -> dict[str, Any]:
    def value(v: Any) -> dict[str, Any]:
        return {"int": v} if isinstance(v, int) else {"string": v}

    return {"name": name, "attributes": {k: value(v) for k, v in attrs.items()}}


def server_devices(rack_id: str, server: int) -> list[dict[str, Any]]:
    """Core partitions of 1/2/4 cores, chips and the server device of one server."""
    out = []
    for chip in range(RACK.chips_per_server):
        for size in (1, 2, 4):
            for start in range(0, RACK.chip.cores, size):
                out.append(
                    device(
                        f"s{server}-c{chip}-cores{start}-{size}",
                        resourceType="core",
                        ultraserverId=rack_id,
                        serverIndex=server,
                        chipIndex=chip,
                        coreStart=start,
                        coreCount=size,
                    )
                )
        out.append(
            device(
                f"s{server}-chip{chip}",
                resourceType="chip",
                ultraserverId=rack_id,
                serverIndex=server,
                chipIndex=chip,
                coreStart=0,
                coreCount=RACK.chip.cores,
            )
        )
    out.append(
        device(
            f"s{server}",
            resourceType="server",
            ultraserverId=rack_id,
            serverIndex=server,
            coreStart=0,
            coreCount=RACK.chip.cores * RACK.chips_per_server,
        )
    )
    return out


def rack_slice(rack_id: str, servers: range, name: str = "") -> dict[str, Any]:
    devices = [d for s in servers for d in server_devices(rack_id, s)]
    devices.append(
        device(
            "rack",
            resourceType="ultraserver",
            ultraserverId=rack_id,
            coreStart=0,
            coreCount=RACK.cores,
        )
    )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{rack_id}-slice"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": rack_id, "generation": 1, "resourceSliceCount": 1},
            "allNodes": True,
            "devices": devices,
        },
    }


def allocated_claim(
    rack_id: str, devices: list[str], config: list[dict[str, Any]] | None = None, uid: str = "u1"
) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns", "uid": uid},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "req", "driver": DRIVER, "pool": rack_id, "device": d}
                        for d in devices
                    ],
                    "config": config or [],
                }
            }
        },
    }


def neuron_config(lnc: int) -> dict[str, Any]:
    return {
        "source": "FromClaim",
        "requests": [],
        "opaque": {
            "driver": DRIVER,
            "parameters": {
                "apiVersion": "trainium.sim.dev/v1alpha1",
                "kind": "NeuronConfig",
                "logicalNeuronCore": lnc,
            },
        },
    }
