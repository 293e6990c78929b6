"""Kueue from its own Helm chart on a cluster running the driver's chart
(`make kind-kueue`, hack/kind/kueue.sh), configured as `trainium-dra up
--with-kueue` configures its manager: the same admission settings and
`deviceClassMappings` (settings.py), the same default queues (queues.py),
computed from the cluster's own DeviceClasses, UltraServers and Nodes.

    kubectl get deviceclasses,ultraservers,nodes -o json |
      python -m localsim.kueue.chartvalues VALUES QUEUES

writes the chart's values to VALUES and the default queues to QUEUES (YAML)."""

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from driver.names import DEFAULT_DRIVER_NAME
from localsim.clusterspec import RACK_LABEL, ClusterRack, ClusterSpec
from localsim.kueue.queues import NODE_RESOURCES, QueueSpecError, queue_objects, quotas
from localsim.kueue.settings import chart_configuration, device_class_mappings
from simdevice.topology import rack_spec


def of_kind(objects: Sequence[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def racks_of(objects: Sequence[Mapping[str, Any]]) -> tuple[ClusterRack, ...]:
    """Each UltraServer with the Nodes its rack label gives it."""
    nodes = of_kind(objects, "Node")
    racks = []
    for rack in of_kind(objects, "UltraServer"):
        name, generation = rack["metadata"]["name"], rack["spec"]["generation"]
        labelled = [n for n in nodes if n["metadata"].get("labels", {}).get(RACK_LABEL) == name]
        racks.append(ClusterRack(name, generation, rack_spec(generation).servers, len(labelled)))
    if not racks:
        raise QueueSpecError("no UltraServer: install the driver's chart before Kueue")
    return tuple(racks)


def node_allocatable(objects: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The cpu and memory one Node offers; the queue counts every Node alike."""
    offered = {
        tuple(n["status"]["allocatable"][r] for r in NODE_RESOURCES)
        for n in of_kind(objects, "Node")
    }
    if len(offered) != 1:
        raise QueueSpecError(
            f"the Nodes offer different cpu and memory ({sorted(offered)}); the default "
            "queue counts every Node alike"
        )
    return dict(zip(NODE_RESOURCES, offered.pop(), strict=True))


def chart_values(mappings: list[dict[str, Any]]) -> dict[str, Any]:
    """Kueue's chart values: its manager's Configuration."""
    config = yaml.safe_dump(chart_configuration(mappings), sort_keys=False)
    return {"managerConfig": {"controllerManagerConfigYaml": config}}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="chartvalues", description=__doc__.split("\n\n")[0])
    p.add_argument("values", type=Path, help="where to write Kueue's chart values")
    p.add_argument("queues", type=Path, help="where to write the default queues")
    args = p.parse_args(argv)
    objects = json.load(sys.stdin)["items"]
    mappings = device_class_mappings(of_kind(objects, "DeviceClass"))
    try:
        spec = ClusterSpec(racks_of(objects), driver=DEFAULT_DRIVER_NAME)
        quota = quotas(spec, mappings, spec.driver, node_allocatable(objects))
    except QueueSpecError as err:
        print(f"chartvalues: {err}", file=sys.stderr)
        return 1
    args.values.write_text(yaml.safe_dump(chart_values(mappings), sort_keys=False))
    args.queues.write_text(yaml.safe_dump_all(queue_objects(quota), sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
