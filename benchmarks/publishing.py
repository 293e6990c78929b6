"""Publishing racks with our controller and with the upstream Go ResourceSlice
controller, on one control plane: the measurements shared by
benchmarks/controller.py and benchmarks/scale.py.

Ours: from starting the controller process to every rack Ready, then resyncs
with nothing changed, then one rack's health changing. Theirs: the same
slices (built by our pure slice builder, written to a JSON file) published by
hack/slice-anchor, a small Go program around the upstream controller.
"""

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import httpx
from kubernetes import client

from driver.controller.rackstate import desired_rack
from driver.controller.slices import MANAGED
from driver.devicemodel.ultraserver import parse_spec
from driver.names import DEFAULT_DRIVER_NAME, rack_label
from driver.procstat import process_cpu_seconds
from localsim.controlplane.plane import ControlPlane, free_port
from testbed.controlplane import (
    WRITE_VERBS,
    controller,
    custom,
    delta,
    metric_key,
    metric_samples,
    request_counts,
    ultraserver,
)
from testbed.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent
ANCHOR_BUILD = ROOT / "hack" / "slice-anchor" / "build.sh"
GEN2_SLICES = 5 + 36 + 1
RESYNC_SECONDS = 5.0
WORKERS = 4
NOOP_RESYNCS = 3
GROUP, VERSION = "trainium.sim.dev", "v1alpha1"
SLICE_RESOURCE = "resourceslices.resource.k8s.io"
OURS = ("resourceslices", "ultraservers")


def rack_nodes(rack: int) -> list[str]:
    return [f"bench-r{rack:03d}-s{s:02d}" for s in range(36)]


def rack_names(racks: int) -> list[str]:
    return [f"bench-{i:03d}" for i in range(racks)]


def summarize(d: dict[tuple[str, str, str], int]) -> dict[str, int]:
    """Requests by resource and verb, only those the controller makes."""
    out: dict[str, int] = {}
    for (resource, sub, verb), n in d.items():
        if resource in (
            "resourceslices",
            "ultraservers",
            "nodedevicehealths",
            "resourceclaims",
            "nodes",
            "leases",
        ):
            out[f"{resource}{'/' + sub if sub else ''} {verb}"] = n
    return dict(sorted(out.items()))


def ready_racks(api: client.ApiClient) -> int:
    items = custom(api).list_cluster_custom_object(GROUP, VERSION, "ultraservers")["items"]
    return sum(
        1
        for r in items
        for c in (r.get("status") or {}).get("conditions") or []
        if c["type"] == "Ready" and c["status"] == "True"
    )


def delete_racks(api: client.ApiClient, names: list[str]) -> None:
    """Delete the racks' slices, then the racks, so the garbage collector has
    nothing left to delete in the next measurement. Rack by rack: one
    collection delete of 100 racks answers with ~190 MB."""
    for name in names:
        custom(api).delete_collection_cluster_custom_object(
            "resource.k8s.io",
            "v1",
            "resourceslices",
            label_selector=f"{MANAGED},{rack_label(DEFAULT_DRIVER_NAME)}={name}",
        )
        custom(api).delete_cluster_custom_object(GROUP, VERSION, "ultraservers", name)


def no_slices_left(api: client.ApiClient) -> bool:
    return not custom(api).list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", limit=1
    )["items"]


def remove_published(api: client.ApiClient, racks: int) -> None:
    delete_racks(api, rack_names(racks))
    wait_for("racks gone", lambda: no_slices_left(api), 600, 1)


def controller_samples(port: int) -> dict[Any, float]:
    return metric_samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text)


def own_writes(samples: dict[Any, float]) -> dict[str, int]:
    """The controller's own count of its writes, by resource and verb."""
    return {
        f"{labels['resource']} {labels['verb']}": int(value)
        for (name, pairs), value in samples.items()
        if name == "trainium_dra_controller_writes_total" and (labels := dict(pairs))
    }


def counter(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get(metric_key(name, **labels), 0.0)


def ok_reconciles(samples: dict[Any, float]) -> int:
    return int(counter(samples, "trainium_dra_controller_reconciles_total", result="ok"))


def writes_to(counts: dict[str, int], resource: str) -> int:
    return sum(n for key, n in counts.items() if key.split(" ")[0] == resource)


def rss_bytes(pid: int) -> tuple[int, int]:
    """(resident now, peak resident) of a process, from /proc."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def apiserver_cpu(cp: ControlPlane) -> float:
    for line in cp.kubectl("get", "--raw", "/metrics").stdout.splitlines():
        if line.startswith("process_cpu_seconds_total "):
            return float(line.split()[1])
    return 0.0


ETCD_SETTLE_SECONDS: Final = 2.0
"""etcd recomputes its size metrics when it commits its backend, every 100 ms
by default."""


def clear_etcd_history(cp: ControlPlane) -> None:
    """Compact etcd's history to its current revision and defragment its file:
    what earlier runs wrote and deleted would otherwise stay in the database
    and count in a size read afterwards."""
    cp.compact_etcd()
    defragmented = httpx.post(
        f"http://127.0.0.1:{cp.config.ports.etcd_client}/v3/maintenance/defragment",
        json={},
        timeout=300,
    )
    defragmented.raise_for_status()
    time.sleep(ETCD_SETTLE_SECONDS)


def storage(cp: ControlPlane) -> dict[str, int]:
    """What etcd holds: its database size (and the apiserver's periodic object count)."""
    text = cp.kubectl("get", "--raw", "/metrics").stdout
    objects = 0
    for line in text.splitlines():
        if line.startswith("apiserver_storage_objects{") and f'"{SLICE_RESOURCE}"' in line:
            objects = int(float(line.rsplit(" ", 1)[1]))
    etcd = httpx.get(f"http://127.0.0.1:{cp.config.ports.etcd_client}/metrics", timeout=30).text
    db = in_use = 0
    for line in etcd.splitlines():
        if line.startswith("etcd_mvcc_db_total_size_in_bytes "):
            db = int(float(line.split()[1]))
        elif line.startswith("etcd_mvcc_db_total_size_in_use_in_bytes "):
            in_use = int(float(line.split()[1]))
    return {"slice_objects": objects, "etcd_db_bytes": db, "etcd_db_in_use_bytes": in_use}


def slice_bytes(api: client.ApiClient) -> tuple[int, int]:
    """(slices, bytes of their JSON as the apiserver serves them), page by page."""
    count = size = 0
    token = None
    while True:
        resp = custom(api).list_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", limit=200, _continue=token
        )
        for item in resp["items"]:
            count += 1
            size += len(json.dumps(item, separators=(",", ":")))
        token = resp["metadata"].get("continue")
        if not token:
            return count, size


def slice_versions(api: client.ApiClient) -> dict[str, str]:
    """Every slice's resourceVersion, from metadata only."""
    resp = api.call_api(
        "GET",
        api.configuration.host + "/apis/resource.k8s.io/v1/resourceslices",
        header_params={"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}
        | auth_headers(api),
    )
    resp.read()
    items = json.loads(resp.data)["items"]
    return {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in items}


def auth_headers(api: client.ApiClient) -> dict[str, str]:
    headers: dict[str, str] = {}
    api.update_params_for_auth(headers, [], ["BearerToken"], "", "GET", None)
    return headers


def create_racks(api: client.ApiClient, racks: int, **spec: Any) -> None:
    """`racks` Trn3 Gen2 UltraServers on their nodes, with `spec` fields added."""
    for i, name in enumerate(rack_names(racks)):
        custom(api).create_cluster_custom_object(
            GROUP, VERSION, "ultraservers", ultraserver(name, "trn3-gen2", rack_nodes(i), **spec)
        )


def report_failed_chip(api: client.ApiClient, node: str, chip: int) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeDeviceHealth",
        "metadata": {"name": node},
        "spec": {"nodeName": node, "devices": [{"chip": chip, "state": "failed"}]},
    }
    custom(api).create_cluster_custom_object(GROUP, VERSION, "nodedevicehealths", body)


def unhealthy_devices(api: client.ApiClient, rack: str) -> int:
    obj = custom(api).get_cluster_custom_object(GROUP, VERSION, "ultraservers", rack)
    return len((obj.get("status") or {}).get("unhealthyDevices") or [])


def publish_ours(
    cp: ControlPlane, api: client.ApiClient, racks: int, log: Path, *, follow_up: bool
) -> dict[str, Any]:
    """Create `racks` UltraServers, start the controller, wait until all are Ready,
    then let it resync with nothing changed; with `follow_up` then change one rack.
    Last, what the apiserver and etcd hold."""
    create_racks(api, racks)
    before, apiserver_before = request_counts(cp), apiserver_cpu(cp)
    port = free_port()
    t0 = time.perf_counter()
    with controller(
        cp,
        log,
        "--resync-seconds",
        str(RESYNC_SECONDS),
        "--workers",
        str(WORKERS),
        "--lease-name",
        "bench",
        f"--http-address=127.0.0.1:{port}",
    ) as proc:
        wait_for(f"{racks} racks ready", lambda: ready_racks(api) == racks, 3600, 0.5)
        elapsed = time.perf_counter() - t0
        cpu = process_cpu_seconds(proc.pid)
        used = delta(before, request_counts(cp))
        samples = controller_samples(port)
        own = own_writes(samples)
        rss, peak = rss_bytes(proc.pid)
        result: dict[str, Any] = {
            "racks": racks,
            "slices": racks * GEN2_SLICES,
            "seconds": round(elapsed, 2),
            "slice_writes": writes_to(own, "resourceslices"),
            "status_writes": writes_to(own, "ultraservers/status"),
            "controller_writes": own,
            "apiserver_slice_writes": sum(
                n for (r, _, v), n in used.items() if r == "resourceslices" and v in WRITE_VERBS
            ),
            "requests": summarize(used),
            "controller_cpu_seconds": round(cpu, 2),
            "apiserver_cpu_seconds": round(apiserver_cpu(cp) - apiserver_before, 2),
            "controller_rss_bytes": rss,
            "controller_peak_rss_bytes": peak,
        }
        result["noop_resync"] = noop_resyncs(cp, port, racks)
        if follow_up:
            result["one_rack_change"] = one_rack_change(api, port)
        result["controller_rss_after_bytes"] = rss_bytes(proc.pid)[0]
    result["storage"] = storage(cp)
    # apiserver_storage_objects is refreshed only now and then; the LIST is exact.
    result["storage"]["slice_objects"], result["storage"]["slice_json_bytes"] = slice_bytes(api)
    return result


def noop_resyncs(cp: ControlPlane, port: int, racks: int) -> dict[str, Any]:
    """Wait out `NOOP_RESYNCS` periodic resyncs of every rack with nothing
    changed; the controller's reconcile histogram gives its time per rack."""
    time.sleep(1)
    quiet, start = request_counts(cp), controller_samples(port)
    t1 = time.perf_counter()
    wait_for(
        f"{NOOP_RESYNCS} resyncs of every rack",
        lambda: (
            ok_reconciles(controller_samples(port)) - ok_reconciles(start) >= NOOP_RESYNCS * racks
        ),
        3600,
        0.5,
    )
    seconds = time.perf_counter() - t1
    idle = delta(quiet, request_counts(cp))
    end = controller_samples(port)

    def moved(name: str, **labels: str) -> float:
        return counter(end, name, **labels) - counter(start, name, **labels)

    reconciles = ok_reconciles(end) - ok_reconciles(start)
    busy = moved("trainium_dra_controller_reconcile_duration_seconds_sum")
    count = moved("trainium_dra_controller_reconcile_duration_seconds_count")
    return {
        "seconds": round(seconds, 2),
        "reconciles": reconciles,
        "unchanged": int(moved("trainium_dra_controller_reconcile_paths_total", path="unchanged")),
        "rebuilt": int(moved("trainium_dra_controller_reconcile_paths_total", path="rebuilt")),
        "slice_lists": int(moved("trainium_dra_controller_slice_lists_total")),
        "ms_per_rack": round(1000 * busy / count, 2) if count else None,
        "writes": sum(own_writes(end).values()) - sum(own_writes(start).values()),
        "apiserver_writes": sum(
            n for (r, _, v), n in idle.items() if r in OURS and v in WRITE_VERBS
        ),
        "apiserver_slice_lists": idle.get(("resourceslices", "", "LIST"), 0),
        "requests": summarize(idle),
    }


def one_rack_change(api: client.ApiClient, port: int) -> dict[str, Any]:
    """A chip of rack 0 fails: which slices of which racks are written."""
    versions, start = slice_versions(api), controller_samples(port)
    rack, node = rack_names(1)[0], rack_nodes(0)[0]
    report_failed_chip(api, node, 0)
    wait_for("the failed chip in status", lambda: unhealthy_devices(api, rack) > 0, 600, 0.2)
    time.sleep(RESYNC_SECONDS)
    after, end = slice_versions(api), controller_samples(port)
    changed = sorted(n for n, v in after.items() if versions.get(n) != v)
    custom(api).delete_cluster_custom_object(GROUP, VERSION, "nodedevicehealths", node)
    return {
        "slices_written": len(changed),
        "racks_written": sorted({n.split(".", 1)[0] for n in changed}),
        "slice_writes": writes_to(own_writes(end), "resourceslices")
        - writes_to(own_writes(start), "resourceslices"),
    }


def desired_slices(racks: int) -> dict[str, list[Any]]:
    """Our builder's slices for the benchmark racks, by pool, as the controller would
    publish them (every node present, healthy)."""
    pools = {}
    for i, name in enumerate(rack_names(racks)):
        obj = ultraserver(name, "trn3-gen2", rack_nodes(i))
        obj["metadata"].update(uid=f"uid-{name}", generation=1)
        nodes = {n: {"kubernetes.io/hostname": n} for n in rack_nodes(i)}
        pools[name] = desired_rack(parse_spec(obj), nodes, {}, DEFAULT_DRIVER_NAME).slices
    return pools


def anchor_binary() -> Path:
    out = subprocess.run([str(ANCHOR_BUILD)], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def publish_anchor(
    cp: ControlPlane, api: client.ApiClient, racks: int, noop_rounds: int = NOOP_RESYNCS
) -> dict[str, Any]:
    """The upstream controller publishing the same racks' slices: cold, then
    `noop_rounds` updates with nothing changed, then removing them."""
    binary = anchor_binary()
    with tempfile.TemporaryDirectory(prefix="slice-anchor-") as tmp:
        path = Path(tmp) / "slices.json"
        path.write_text(json.dumps({"driver": DEFAULT_DRIVER_NAME, "pools": desired_slices(racks)}))
        before, apiserver_before = request_counts(cp), apiserver_cpu(cp)
        out = subprocess.run(
            [
                str(binary),
                f"-kubeconfig={cp.kubeconfig}",
                f"-slices={path}",
                f"-noop-rounds={noop_rounds}",
            ],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "GOMAXPROCS": str(os.cpu_count() or 1)},
        )
    used = delta(before, request_counts(cp))
    apiserver_used = apiserver_cpu(cp) - apiserver_before
    phases = {p["phase"]: p for p in map(json.loads, out.stdout.splitlines())}
    wait_for("anchor slices gone", lambda: no_slices_left(api), 600, 1)
    noop = phases["noop"]
    return {
        "racks": racks,
        "seconds": round(phases["publish"]["seconds"], 2),
        "slice_creates": phases["publish"]["creates"],
        "cpu_seconds": round(phases["publish"]["cpu_seconds"], 2),
        "apiserver_cpu_seconds_all_phases": round(apiserver_used, 2),
        "noop_syncs": noop["syncs"],
        "noop_writes": noop["writes"],
        "noop_ms_per_rack": round(1000 * noop["seconds"] / noop["syncs"], 2),
        # Read when the last slice was created, as ours is when every rack is Ready.
        "heap_inuse_bytes": phases["publish"]["heap_inuse_bytes"],
        "rss_bytes": phases["publish"]["rss_bytes"],
        "remove_seconds": round(phases["remove"]["seconds"], 2),
        "requests": summarize(used),
    }
