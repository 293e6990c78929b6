"""`trainium-dra status`: the local cluster as tables — racks, devices by kind,
allocations by claim (with the cores each container sees) and unhealthy devices.

Reading is split from printing: `collect` makes plain rows, `render` lays
them out.
"""

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from driver.jsontypes import JSON
from driver.names import API_GROUP, API_VERSION, DEVICE_KINDS
from localsim.clusterspec import ClusterSpec
from localsim.commands.flags import parse_status
from localsim.commands.running import NotRunningError, open_running
from localsim.paths import ClusterPaths


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns, like kubectl get."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join(
        "   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


@dataclass(frozen=True)
class ClaimCores:
    """What the node daemon gave a claim's containers (from its CDI spec)."""

    lnc: str
    visible: str


def claim_cores(paths: ClusterPaths, spec: ClusterSpec, uid: str) -> dict[str, ClaimCores]:
    """Node -> the claim's cores there, read from every node's CDI specs: the
    stand-in's daemons write them there, and a real node bind-mounts the same
    directory at its /var/run/cdi."""
    out = {}
    for rack in spec.racks:
        for node in rack.node_names():
            path = paths.cdi_dir(node) / f"k8s.{spec.driver}-claim_{uid}.json"
            if not path.exists():
                continue
            env = dict(
                item.partition("=")[::2]
                for device in json.loads(path.read_text()).get("devices") or []
                for item in (device.get("containerEdits") or {}).get("env") or []
            )
            out[node] = ClaimCores(
                env.get("NEURON_LOGICAL_NC_CONFIG", "?"), env.get("NEURON_RT_VISIBLE_CORES", "")
            )
    return out


def compact(ids: str) -> str:
    """'0,1,2,3,8' -> '0-3,8'."""
    numbers = sorted(int(x) for x in ids.split(",") if x)
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def rack_rows(racks: Sequence[JSON]) -> list[list[object]]:
    rows = []
    for r in racks:
        st = r.get("status") or {}
        conditions = {c["type"]: c["status"] for c in st.get("conditions") or []}
        cores = st.get("cores") or {}
        rows.append(
            [
                r["metadata"]["name"],
                r["spec"]["generation"],
                r["spec"].get("mode", "partitioned"),
                (st.get("servers") or {}).get("summary", "?"),
                cores.get("total", "?"),
                cores.get("allocated", "?"),
                cores.get("free", "?"),
                cores.get("unhealthy", 0),
                conditions.get("Ready", "?"),
            ]
        )
    return rows


def device_rows(racks: Sequence[JSON]) -> list[list[object]]:
    return [
        [
            r["metadata"]["name"],
            *(((r.get("status") or {}).get("devices") or {}).get(k, 0) for k in DEVICE_KINDS),
        ]
        for r in racks
    ]


def consumer_names(reserved: Sequence[JSON], pods: Mapping[str, JSON]) -> list[str]:
    """Pods by name; a claim reserved for a whole PodGroup shows the group."""
    names = []
    for ref in reserved:
        if ref.get("resource") == "podgroups":
            names.append(f"podgroup/{ref['name']}")
        elif pod := pods.get(ref["uid"]):
            names.append(pod["metadata"]["name"])
    return names


def allocation_rows(
    claims: Sequence[JSON], pods: Mapping[str, JSON], driver: str, cores: Any
) -> list[list[object]]:
    """One row per claim and node; `cores(uid)` gives node -> ClaimCores."""
    rows: list[list[object]] = []
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = [
            r
            for r in (allocation.get("devices") or {}).get("results") or []
            if r["driver"] == driver
        ]
        if not results:
            continue
        meta = claim["metadata"]
        names = sorted(consumer_names(claim["status"].get("reservedFor") or [], pods))
        devices = sorted({f"{r['pool']}/{r['device']}" for r in results})
        admin = any(r.get("adminAccess") for r in results)
        shown = devices if len(devices) <= 3 else [*devices[:2], f"... ({len(devices)} devices)"]
        pods_text = ",".join(names) if len(names) <= 3 else f"{names[0]},... ({len(names)} pods)"
        per_node: Mapping[str, ClaimCores] = cores(meta["uid"])
        nodes = sorted(per_node) or ["-"]
        for i, node in enumerate(nodes[:3]):
            got = per_node.get(node)
            rows.append(
                [
                    meta["namespace"] if i == 0 else "",
                    meta["name"] if i == 0 else "",
                    " ".join(shown) + (" (admin)" if admin else "") if i == 0 else "",
                    pods_text if i == 0 else "",
                    node,
                    got.lnc if got else "-",
                    compact(got.visible) if got else "-",
                ]
            )
        if len(nodes) > 3:
            rows.append(["", "", "", "", f"... {len(nodes) - 3} more nodes", "", ""])
    return rows


def unhealthy_rows(racks: Sequence[JSON]) -> list[list[object]]:
    return [
        [r["metadata"]["name"], u["device"], u.get("node", ""), u["state"], u.get("reason", "")]
        for r in racks
        for u in (r.get("status") or {}).get("unhealthyDevices") or []
    ]


def render(paths: ClusterPaths, spec: ClusterSpec, api: client.ApiClient) -> str:
    custom = client.CustomObjectsApi(api)
    racks = custom.list_cluster_custom_object(API_GROUP, API_VERSION, "ultraservers")["items"]
    claims = api.sanitize_for_serialization(
        client.ResourceV1Api(api).list_resource_claim_for_all_namespaces()
    )["items"]
    pods = {
        p["metadata"]["uid"]: p
        for p in api.sanitize_for_serialization(
            client.CoreV1Api(api).list_pod_for_all_namespaces()
        )["items"]
    }
    allocations = allocation_rows(
        claims, pods, spec.driver, lambda uid: claim_cores(paths, spec, uid)
    )
    unhealthy = unhealthy_rows(racks)
    sections = [
        "RACKS\n"
        + table(
            [
                "NAME",
                "GENERATION",
                "MODE",
                "SERVERS",
                "CORES",
                "ALLOCATED",
                "FREE",
                "UNHEALTHY",
                "READY",
            ],
            rack_rows(racks),
        ),
        "DEVICES BY KIND\n"
        + table(["RACK", *(k.upper() for k in DEVICE_KINDS)], device_rows(racks)),
        "ALLOCATIONS BY CLAIM\n"
        + (
            table(
                ["NAMESPACE", "CLAIM", "DEVICES", "PODS", "NODE", "LNC", "VISIBLE CORES"],
                allocations,
            )
            if allocations
            else "(no claim holds a device of this driver)"
        ),
        "UNHEALTHY DEVICES\n"
        + (
            table(["RACK", "DEVICE", "NODE", "STATE", "REASON"], unhealthy)
            if unhealthy
            else "(none)"
        ),
    ]
    return "\n\n".join(sections)


def main(argv: list[str]) -> int:
    paths = parse_status(argv)
    try:
        with open_running(paths) as cluster:
            print(render(paths, cluster.spec, cluster.api))
    except NotRunningError as err:
        print(f"trainium-dra status: {err}", file=sys.stderr)
        return 1
    return 0
