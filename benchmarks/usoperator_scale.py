"""The simulated UltraServer operator at fleet scale: 100 Trn3 Gen1
UltraServers of the AWS profile (400 nodes of 16 chips) and 50
NeuronUltraServerWorkloads of every shape (`topologySize` 1, 2, 4 times
`serverCount` 1, 2), allocated together and then deleted together.

No node daemon runs: the Nodes are created as the local cluster labels them,
and the ResourceSlices the controller would publish for those racks are
written by the driver's own slice builder. The operator is the real process,
started as `trainium-dra up --profile aws` starts it (the chart's RBAC, its
ServiceAccount's token). The control plane is etcd and kube-apiserver alone:
nothing here schedules a pod, and the scheduler's cache of 800 slices would
share the two CPUs with the process measured.

Recorded: seconds from each workload's create to its `Allocated` (p50, p90,
max), the operator's CPU seconds per workload while allocating and while
releasing, its resident memory, the seconds until every workload is gone
and every NeuronUltraServer holds nothing. A wrong allocation (a node in two
workloads, a group not of one pair or quad, two groups in one UltraServer)
stops the run with the workloads named.

Usage: python -m benchmarks.usoperator_scale [--racks 100] [--workloads 50]
[--noisy --out FILE] (`make bench-usoperator-scale`)
"""

import argparse
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import cycle, islice
from pathlib import Path
from typing import Any, Final

from kubernetes import client

from benchmarks.publishing import rss_bytes
from benchmarks.report import (
    Conditions,
    add_noisy_flag,
    add_out_flag,
    make_command,
    write_results,
    write_trial,
)
from driver.controller.slices import build_slices
from driver.devicemodel.awsprofile import (
    AWS_DRIVER,
    ULTRASERVER_LABEL_PREFIX,
    AwsVersions,
    instance_type,
)
from driver.devicemodel.poolplan import AwsRack, RackInput
from driver.devicemodel.profiles import AWS
from driver.jsontypes import JSON
from driver.names import driver_version
from driver.procstat import process_cpu_seconds
from driver.usoperator.names import GROUP, ULTRASERVERS, VERSION, WORKLOADS
from localsim import serviceaccounts
from localsim.clusterspec import ClusterRack, ClusterSpec, node_labels
from localsim.controlplane import chart
from localsim.controlplane.binaries import Binaries
from localsim.controlplane.plane import ControlPlane, free_port
from localsim.paths import ClusterPaths
from localsim.standin.argv import OPERATOR_COMPONENT, operator_argv, operator_values
from simdevice.topology import rack_spec
from testbed.controlplane import CONTROLLER, custom, stop
from testbed.waiting import wait_for

COMMAND = "make bench-usoperator-scale"
GENERATION: Final = "trn3-gen1"
INSTANCE_TYPE: Final = "trn3.48xlarge"
SHAPES: Final = ((1, 1), (2, 1), (4, 1), (1, 2), (2, 2), (4, 2))
"""(topologySize, serverCount) of the workloads, in turn."""
NAMESPACE: Final = "bench-usoperator"
POLL_SECONDS: Final = 0.1
"""How often the workloads are listed while they are allocated or released."""
TIMEOUT: Final = 600.0


def fleet(racks: int) -> ClusterSpec:
    """`racks` Trn3 Gen1 UltraServers of the AWS profile, `us-000`, `us-001`, ...
    (beyond the 26 racks `up` names by letter)."""
    servers = rack_spec(GENERATION).servers
    cluster_racks = tuple(
        ClusterRack(f"us-{i:03d}", GENERATION, servers, servers, INSTANCE_TYPE)
        for i in range(racks)
    )
    return ClusterSpec(cluster_racks, driver=AWS_DRIVER, profile=AWS.name)


def fleet_nodes(spec: ClusterSpec) -> dict[str, dict[str, str]]:
    """Every node's name and labels, as the local cluster labels them."""
    return {
        rack.node_name(server): node_labels(rack, server) | spec.profile_labels(rack, server)
        for rack in spec.racks
        for server in range(rack.nodes)
    }


def fleet_slices(spec: ClusterSpec) -> list[JSON]:
    """The ResourceSlices the controller publishes for the fleet's racks, nothing allocated."""
    versions = AwsVersions(dra_driver=driver_version())
    out = []
    for rack in spec.racks:
        out += build_slices(
            RackInput(
                name=rack.name,
                rack=rack_spec(rack.generation),
                mode=spec.device_mode,
                flat_device="chip",
                nodes={s: rack.node_name(s) for s in range(rack.nodes)},
                rack_nodes=None,
                taints={},
                binding_conditions=False,
                aws=AwsRack(instance_type(rack.generation, rack.instance_type), versions),
            ),
            spec.driver,
        )
    return out


def workload_objects(count: int) -> list[JSON]:
    """`count` workloads, the shapes of SHAPES in turn, `w-000`, `w-001`, ..."""
    return [
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NeuronUltraServerWorkload",
            "metadata": {"name": f"w-{i:03d}", "namespace": NAMESPACE},
            "spec": {"instanceType": INSTANCE_TYPE, "topologySize": size, "serverCount": count},
        }
        for i, (size, count) in enumerate(islice(cycle(SHAPES), count))
    ]


def nodes_needed(workloads: Sequence[JSON]) -> int:
    return sum(w["spec"]["topologySize"] * w["spec"]["serverCount"] for w in workloads)


def allocation_errors(
    workloads: Sequence[JSON], labels: Mapping[str, Mapping[str, str]], rack_of: Mapping[str, str]
) -> list[str]:
    """What is wrong with the allocations the workloads' statuses name: a node
    held twice, a node count not `topologySize` x `serverCount`, a group not
    one pair or quad (`labels`), groups sharing an UltraServer (`rack_of`)."""
    errors = []
    holder: dict[str, str] = {}
    for w in workloads:
        name = w["metadata"]["name"]
        size, count = w["spec"]["topologySize"], w["spec"]["serverCount"]
        nodes = list((w.get("status") or {}).get("nodes") or [])
        for node in nodes:
            if node in holder:
                errors.append(f"node {node} is held by both {holder[node]} and {name}")
            holder[node] = name
        if len(nodes) != size * count:
            errors.append(f"{name} holds {len(nodes)} nodes, wants {size} x {count}")
        groups: dict[str, list[str]] = {}
        for node in nodes:
            groups.setdefault(rack_of[node], []).append(node)
        if len(groups) != count:
            errors.append(f"{name} holds nodes of {len(groups)} UltraServers, wants {count}")
        for rack, members in groups.items():
            key = f"{ULTRASERVER_LABEL_PREFIX}{size}"
            values = {labels[n].get(key, n) for n in members}
            if len(members) != size or (size > 1 and len(values) != 1):
                errors.append(f"{name} holds {sorted(members)} of {rack}, not one group of {size}")
    return errors


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: a value that was measured."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * fraction // 1))
    return ordered[int(rank) - 1]


@dataclass
class Fleet:
    """A control plane holding the fleet's Nodes and slices, with the operator running."""

    cp: ControlPlane
    api: client.ApiClient
    spec: ClusterSpec
    operator: subprocess.Popen[bytes]

    @property
    def labels(self) -> dict[str, dict[str, str]]:
        return fleet_nodes(self.spec)

    @property
    def rack_of(self) -> dict[str, str]:
        return {r.node_name(s): r.name for r in self.spec.racks for s in range(r.nodes)}


@contextmanager
def running_fleet(cp: ControlPlane, workdir: Path, racks: int) -> Iterator[Fleet]:
    """The chart installed with the operator on (as `up --profile aws` installs
    it), the fleet's Nodes and slices created, the operator started with its
    ServiceAccount's token; yields once it has a NeuronUltraServer per rack."""
    spec = fleet(racks)
    paths = ClusterPaths(workdir / "cluster")
    rendered = chart.install(
        Binaries.locate(), cp.kubeconfig, spec.driver, spec.profile, operator_values(spec)
    )
    with cp.api_client() as api:
        for node, labels in fleet_nodes(spec).items():
            cp.create_node(node, labels)
        for s in fleet_slices(spec):
            custom(api).create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", s)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        paths.credentials_dir.mkdir(parents=True, exist_ok=True)
        serviceaccounts.write_account_kubeconfig(
            api, cp.kubeconfig, rendered, OPERATOR_COMPONENT, paths.operator_kubeconfig
        )
        argv = operator_argv(paths, spec, free_port(), chart.NAMESPACE)
        with (workdir / "operator.log").open("ab") as log:
            operator = subprocess.Popen(
                [str(CONTROLLER), *argv], stdout=log, stderr=subprocess.STDOUT
            )
        try:
            wait_for(
                f"a NeuronUltraServer for each of {racks} racks (log: {workdir / 'operator.log'})",
                lambda: len(ultraservers(api)) == racks or None,
                timeout=TIMEOUT,
            )
            yield Fleet(cp, api, spec, operator)
        finally:
            stop(operator)


def ultraservers(api: client.ApiClient) -> list[JSON]:
    found: list[JSON] = custom(api).list_namespaced_custom_object(
        GROUP, VERSION, chart.NAMESPACE, ULTRASERVERS.plural
    )["items"]
    return found


def listed_workloads(api: client.ApiClient) -> list[JSON]:
    found: list[JSON] = custom(api).list_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, WORKLOADS.plural
    )["items"]
    return found


def poll_until(what: str, probe: Any) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {TIMEOUT:g} s waiting for {what}")
        time.sleep(POLL_SECONDS)


def allocate_and_release(f: Fleet, count: int) -> dict[str, Any]:
    """Create `count` workloads at once, time each to `Allocated`, check the
    allocations, then delete them all and time the release; the operator's CPU
    and memory around each phase."""
    workloads = workload_objects(count)
    racks = len(f.spec.racks)
    if nodes_needed(workloads) > racks * rack_spec(GENERATION).servers:
        raise SystemExit(f"--workloads: {count} workloads need more nodes than {racks} racks have")
    pid = f.operator.pid
    objects = custom(f.api)
    cpu_before = process_cpu_seconds(pid)
    created: dict[str, float] = {}
    allocated: dict[str, float] = {}
    started = time.monotonic()
    for w in workloads:
        objects.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, WORKLOADS.plural, w)
        created[w["metadata"]["name"]] = time.monotonic()

    def all_allocated() -> bool:
        now = time.monotonic()
        for w in listed_workloads(f.api):
            state = (w.get("status") or {}).get("state")
            if state == "Failed":
                raise AssertionError(f"{w['metadata']['name']} Failed: {w['status']}")
            if state == "Allocated":
                allocated.setdefault(w["metadata"]["name"], now)
        return len(allocated) == count

    poll_until(f"{count} workloads Allocated", all_allocated)
    allocate_wall = time.monotonic() - started
    allocate_cpu = process_cpu_seconds(pid) - cpu_before
    rss, _ = rss_bytes(pid)
    errors = allocation_errors(listed_workloads(f.api), f.labels, f.rack_of)
    if errors:
        raise AssertionError("wrong allocations:\n" + "\n".join(errors))
    held = sum(len(u.get("status", {}).get("allocations") or []) for u in ultraservers(f.api))
    cpu_before = process_cpu_seconds(pid)
    started = time.monotonic()
    for w in workloads:
        objects.delete_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, WORKLOADS.plural, w["metadata"]["name"]
        )
    poll_until(
        "every workload gone and every NeuronUltraServer empty",
        lambda: (
            not listed_workloads(f.api)
            and not any(u.get("status", {}).get("allocations") for u in ultraservers(f.api))
        ),
    )
    release_wall = time.monotonic() - started
    release_cpu = process_cpu_seconds(pid) - cpu_before
    _, peak = rss_bytes(pid)
    seconds = [allocated[n] - created[n] for n in created]
    return {
        "racks": racks,
        "nodes": racks * rack_spec(GENERATION).servers,
        "workloads": count,
        "nodes_allocated": nodes_needed(workloads),
        "ultraserver_allocations": held,
        "shapes": [list(s) for s in SHAPES],
        "poll_seconds": POLL_SECONDS,
        "to_allocated_seconds": {
            "p50": round(percentile(seconds, 0.5), 2),
            "p90": round(percentile(seconds, 0.9), 2),
            "max": round(max(seconds), 2),
        },
        "allocate_wall_seconds": round(allocate_wall, 2),
        "allocate_cpu_seconds_per_workload": round(allocate_cpu / count, 4),
        "release_wall_seconds": round(release_wall, 2),
        "release_cpu_seconds_per_workload": round(release_cpu / count, 4),
        "rss_mib_allocated": round(rss / 2**20, 1),
        "rss_mib_peak": round(peak / 2**20, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.usoperator_scale")
    parser.add_argument("--racks", type=int, default=100, help="Trn3 Gen1 UltraServers")
    parser.add_argument("--workloads", type=int, default=50, help="workloads created at once")
    add_out_flag(parser)
    add_noisy_flag(parser)
    args = parser.parse_args(argv)
    if args.racks < 1 or args.workloads < 1:
        parser.error("--racks and --workloads: must be 1 or more")
    conditions = Conditions.begin(args.noisy)
    work = Path(tempfile.mkdtemp(prefix="bench-usoperator-scale-"))
    with (
        ControlPlane.running(work / "cp", storage_only=True) as cp,
        running_fleet(cp, work, args.racks) as f,
    ):
        results = allocate_and_release(f, args.workloads)
    if args.out is not None:
        write_trial(args.out, "usoperator-scale", make_command(COMMAND, argv), results, conditions)
        return 0
    write_results("usoperator-scale", make_command(COMMAND, argv), results, conditions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
