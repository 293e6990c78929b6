"""The controller's slices under the real scheduler: every claim shape a user
writes, exact exclusivity between a rack and its cores, filling a rack, and
device taints from node health reports."""

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

import pytest
from kubernetes import client

from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import (
    allocation,
    condition,
    controller,
    create_claim_and_pod,
    custom,
    get_rack,
    install,
    load_claim,
    published,
    rack_slices,
    ultraserver,
    unschedulable,
)
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

NS = "ctl-alloc"
RACK = "ctl-alloc-gen2"
SMALL = "ctl-alloc-gen1"
GEN2_NODES = [f"ctl-alloc-g2-{i:02d}" for i in range(36)]
GEN1_NODES = [f"ctl-alloc-g1-{i}" for i in range(4)]
GEN2_SLICES = 5 + 36 + 1
GEN1_SLICES = 3 + 16 + 1


@pytest.fixture(scope="module")
def api(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[client.ApiClient]:
    install(control_plane)
    for node in GEN2_NODES + GEN1_NODES:
        control_plane.create_node(node)
    log = tmp_path_factory.mktemp("ctl-alloc") / "controller.log"
    with (
        control_plane.api_client() as api,
        controller(control_plane, log, "--resync-seconds", "2", "--lease-name", "ctl-alloc"),
    ):
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": NS}})
        racks = custom(api)
        racks.create_cluster_custom_object(
            "trainium.sim.dev",
            "v1alpha1",
            "ultraservers",
            ultraserver(RACK, "trn3-gen2", GEN2_NODES),
        )
        racks.create_cluster_custom_object(
            "trainium.sim.dev",
            "v1alpha1",
            "ultraservers",
            ultraserver(SMALL, "trn3-gen1", GEN1_NODES),
        )
        wait_for(
            "both racks published",
            lambda: published(api, RACK, GEN2_SLICES) and published(api, SMALL, GEN1_SLICES),
            120,
        )
        try:
            yield api
        finally:
            core.delete_namespace(NS)
            for rack in (RACK, SMALL):
                racks.delete_cluster_custom_object(
                    "trainium.sim.dev", "v1alpha1", "ultraservers", rack
                )
            wait_for(
                "slices removed",
                lambda: not rack_slices(api, RACK) and not rack_slices(api, SMALL),
                60,
            )
            for node in GEN2_NODES + GEN1_NODES:
                control_plane.delete_node(node)
            racks.delete_namespaced_custom_object(
                "coordination.k8s.io", "v1", "default", "leases", "ctl-alloc"
            )
            wait_for(
                "namespace gone",
                lambda: NS not in [n.metadata.name for n in core.list_namespace().items],
                120,
            )


class Claims:
    """Claims and pods made by one test, deleted after it so the rack is free again."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.names: list[str] = []

    def make(
        self,
        example: str,
        name: str,
        rack: str = RACK,
        extra_cel: str | None = None,
        on: Sequence[str] = (),
    ) -> str:
        claim = load_claim(example, name, NS, rack)
        if extra_cel:
            for request in claim["spec"]["devices"]["requests"]:
                for sub in [request.get("exactly"), *(request.get("firstAvailable") or [])]:
                    if sub is not None:
                        sub["selectors"].append({"cel": {"expression": extra_cel}})
        create_claim_and_pod(self.api, claim, on)
        self.names.append(name)
        return name

    def allocated(self, name: str, timeout: float = 60) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = wait_for(
            f"claim {name} allocated", lambda: allocation(self.api, NS, name), timeout
        )
        return result

    def stays_unallocated(self, name: str) -> str:
        message: str = wait_for(
            f"pod {name} unschedulable", lambda: unschedulable(self.api, NS, name), 60
        )
        assert allocation(self.api, NS, name) is None
        return message

    def delete(self, name: str) -> None:
        """Delete the pod and its claim; either may be gone already (evicted)."""
        core, crs = client.CoreV1Api(self.api), custom(self.api)
        removals: list[Callable[[], object]] = [
            partial(core.delete_namespaced_pod, name, NS, grace_period_seconds=0),
            partial(
                crs.delete_namespaced_custom_object,
                "resource.k8s.io",
                "v1",
                NS,
                "resourceclaims",
                name,
            ),
        ]
        for remove in removals:
            try:
                remove()
            except client.exceptions.ApiException as err:
                if err.status != 404:
                    raise
        self.names.remove(name)

    def delete_all(self) -> None:
        for name in list(self.names):
            self.delete(name)
        wait_for(
            "claims gone",
            lambda: (
                not custom(self.api).list_namespaced_custom_object(
                    "resource.k8s.io", "v1", NS, "resourceclaims"
                )["items"]
            ),
            60,
        )


@pytest.fixture
def claims(api: client.ApiClient) -> Iterator[Claims]:
    made = Claims(api)
    try:
        yield made
    finally:
        made.delete_all()


def rack_attrs(api: client.ApiClient, rack: str) -> dict[str, dict[str, Any]]:
    """Every published device of `rack` and its attributes, from one read of its slices."""
    return {
        d["name"]: {k: next(iter(v.values())) for k, v in d["attributes"].items()}
        for s in rack_slices(api, rack)
        for d in s["spec"].get("devices", [])
    }


def attrs_of(api: client.ApiClient, rack: str, device: str) -> dict[str, Any]:
    published = rack_attrs(api, rack)
    assert device in published, f"device {device} not published"
    return published[device]


@pytest.mark.parametrize(
    ("example", "kind", "cores"),
    [
        ("core-1", "core", 1),
        ("cores-2", "core", 2),
        ("cores-4", "core", 4),
        ("chip", "chip", 8),
        ("server", "server", 32),
    ],
)
def test_claim_of_each_size_gets_one_device_of_that_size(
    api: client.ApiClient, claims: Claims, example: str, kind: str, cores: int
) -> None:
    name = claims.make(example, f"size-{example}")
    [result] = claims.allocated(name)
    assert result["driver"] == "trainium.sim.dev" and result["pool"] == RACK
    attrs = attrs_of(api, RACK, result["device"])
    assert attrs["resourceType"] == kind and attrs["coreCount"] == cores
    assert attrs["coreStart"] % cores == 0 or kind != "core"
    node = wait_for(
        "pod bound", lambda: client.CoreV1Api(api).read_namespaced_pod(name, NS).spec.node_name
    )
    assert node == GEN2_NODES[attrs["serverIndex"]]


def test_whole_rack_claim_gets_the_ultraserver_device(
    api: client.ApiClient, claims: Claims
) -> None:
    [result] = claims.allocated(claims.make("ultraserver", "whole-rack"))
    assert result["device"] == "ultraserver"
    assert attrs_of(api, RACK, "ultraserver")["coreCount"] == 36 * 32
    # Bound before the claim goes: a 1.37 scheduler whose pod still waits on the
    # binding conditions of a deleted claim does not let the rack device go.
    assert wait_for("rack pod bound", lambda: bound_node(api, "whole-rack"), 60)


def test_rack_claim_and_core_claims_exclude_each_other(
    api: client.ApiClient, claims: Claims
) -> None:
    claims.allocated(claims.make("core-1", "excl-core"))
    claims.stays_unallocated(claims.make("ultraserver", "excl-rack-blocked"))
    claims.delete("excl-core")
    claims.allocated("excl-rack-blocked", timeout=120)
    claims.stays_unallocated(claims.make("core-1", "excl-core-blocked"))
    assert wait_for("rack pod bound", lambda: bound_node(api, "excl-rack-blocked"), 60)


def test_match_attribute_same_chip_same_server_same_rack(
    api: client.ApiClient, claims: Claims
) -> None:
    pair = claims.allocated(claims.make("two-cores-same-chip", "same-chip"))
    chips = {attrs_of(api, RACK, r["device"])["rackChipIndex"] for r in pair}
    assert len(pair) == 2 and len(chips) == 1 and pair[0]["device"] != pair[1]["device"]
    two = claims.allocated(claims.make("two-chips-same-server", "same-server"))
    assert len({attrs_of(api, RACK, r["device"])["serverIndex"] for r in two}) == 1
    assert len({r["device"] for r in two}) == 2
    four = claims.allocated(claims.make("chips-same-rack", "same-rack"))
    assert {attrs_of(api, RACK, r["device"])["ultraserverId"] for r in four} == {RACK}
    assert len({r["device"] for r in four}) == 4


def test_first_available_falls_back_to_the_smaller_partition(claims: Claims) -> None:
    on_chip5 = 'device.attributes["trainium.sim.dev"].rackChipIndex == 5'
    [first] = claims.allocated(claims.make("four-cores-or-two", "fa-first", extra_cel=on_chip5))
    assert first["request"] == "cores/four" and first["device"] == "server01-chip01-cores0-3"
    [single] = claims.allocated(claims.make("core-1", "fa-single", extra_cel=on_chip5))
    assert single["device"] == "server01-chip01-core4"
    [second] = claims.allocated(claims.make("four-cores-or-two", "fa-second", extra_cel=on_chip5))
    assert second["request"] == "cores/two" and second["device"] == "server01-chip01-cores6-7"


def test_decreasing_aligned_claims_fill_the_rack_completely(
    api: client.ApiClient, claims: Claims
) -> None:
    plan = [("chip", 36), ("cores-4", 24), ("cores-2", 32), ("core-1", 64)]
    assert sum({"chip": 8, "cores-4": 4, "cores-2": 2, "core-1": 1}[k] * n for k, n in plan) == 512
    attrs = rack_attrs(api, SMALL)  # read once: the rack's slices are large
    used: set[tuple[int, int]] = set()
    for example, count in plan:
        # On the rack's nodes, as the claims' rack selector has it: the
        # scheduler then skips the other rack's 36 nodes and their devices.
        names = [
            claims.make(example, f"fill-{example}-{i}", rack=SMALL, on=GEN1_NODES)
            for i in range(count)
        ]
        for name in names:
            [result] = claims.allocated(name, timeout=120)
            a = attrs[result["device"]]
            cores = {
                (a["rackChipIndex"], c)
                for c in range(a["coreStart"], a["coreStart"] + a["coreCount"])
            }
            assert not cores & used
            used |= cores
    assert len(used) == 512
    rack = wait_for(
        "status counts the allocation",
        lambda: (s := get_rack(api, SMALL)) and s["status"]["cores"]["allocated"] == 512 and s,
    )
    assert rack["status"]["cores"]["free"] == 0
    claims.stays_unallocated(claims.make("core-1", "fill-overflow", rack=SMALL))


def report(api: client.ApiClient, node: str, devices: list[dict[str, Any]]) -> None:
    body: dict[str, Any] = {
        "apiVersion": "trainium.sim.dev/v1alpha1",
        "kind": "NodeDeviceHealth",
        "metadata": {"name": node},
        "spec": {"nodeName": node, "devices": devices},
    }
    api_ = custom(api)
    try:
        current = api_.get_cluster_custom_object(
            "trainium.sim.dev", "v1alpha1", "nodedevicehealths", node
        )
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        api_.replace_cluster_custom_object(
            "trainium.sim.dev", "v1alpha1", "nodedevicehealths", node, body
        )
    except client.exceptions.ApiException as err:
        if err.status != 404:
            raise
        api_.create_cluster_custom_object("trainium.sim.dev", "v1alpha1", "nodedevicehealths", body)


def taints_by_device(api: client.ApiClient) -> dict[str, list[dict[str, Any]]]:
    return {
        d["name"]: d["taints"]
        for s in rack_slices(api, RACK)
        for d in s["spec"].get("devices", [])
        if d.get("taints")
    }


def test_degraded_chip_is_tainted_refused_tolerated_and_recovers(
    api: client.ApiClient, claims: Claims
) -> None:
    node = GEN2_NODES[3]
    try:
        report(api, node, [{"chip": 1, "state": "degraded", "reason": "EccCorrectedHbmStorm"}])
        expected = {f"server03-chip01-core{c}" for c in range(8)} | {
            "server03-chip01",
            "server03",
            "ultraserver",
        }
        expected |= {f"server03-chip01-cores{s}-{s + 1}" for s in range(0, 8, 2)} | {
            "server03-chip01-cores0-3",
            "server03-chip01-cores4-7",
        }

        def published() -> dict[str, list[dict[str, Any]]] | None:
            taints = taints_by_device(api)
            return taints if taints and set(taints) == expected else None

        tainted = wait_for("taints published", published)
        assert all(
            t
            == [
                {
                    "key": "trainium.sim.dev/unhealthy",
                    "value": "degraded",
                    "effect": "NoSchedule",
                    "timeAdded": t[0]["timeAdded"],
                }
            ]
            for t in tainted.values()
        )
        rack = wait_for(
            "status shows it",
            lambda: (r := get_rack(api, RACK)) and r["status"]["unhealthyDevices"] and r,
        )
        assert {d["device"] for d in rack["status"]["unhealthyDevices"]} == expected
        degraded = condition(rack, "Degraded")
        assert degraded and (degraded["status"], degraded["reason"]) == ("True", "DevicesUnhealthy")
        assert rack["status"]["cores"]["unhealthy"] == 8

        on_that_chip = 'device.attributes["trainium.sim.dev"].rackChipIndex == 13'
        claims.stays_unallocated(claims.make("chip", "taint-refused", extra_cel=on_that_chip))
        [tolerated] = claims.allocated(
            claims.make("chip-tolerating-degraded", "taint-tolerated", extra_cel=on_that_chip)
        )
        assert tolerated["device"] == "server03-chip01"

        report(api, node, [{"chip": 1, "core": 6, "state": "failed", "reason": "CoreHang"}])
        wait_for(
            "failed core tainted NoExecute",
            lambda: (
                taints_by_device(api).get("server03-chip01-core6", [{}])[0].get("effect")
                == "NoExecute"
            ),
        )
        failed = taints_by_device(api)
        assert (
            "server03-chip01-core5" not in failed
            and failed["server03-chip01"][0]["value"] == "failed"
        )
        wait_for(
            "pod on the failed chip evicted",
            lambda: _gone_or_terminating(api, "taint-tolerated"),
            90,
        )
    finally:
        report(api, node, [])
    wait_for("taints removed on recovery", lambda: not taints_by_device(api))

    def recovered() -> dict[str, Any] | None:
        rack = get_rack(api, RACK)
        return rack if rack and not rack["status"]["unhealthyDevices"] else None

    degraded = condition(wait_for("status recovered", recovered), "Degraded")
    assert degraded and degraded["status"] == "False"


def _gone_or_terminating(api: client.ApiClient, name: str) -> bool:
    try:
        p = client.CoreV1Api(api).read_namespaced_pod(name, NS)
    except client.exceptions.ApiException as err:
        gone: bool = err.status == 404
        return gone
    terminating: bool = p.metadata.deletion_timestamp is not None
    disrupted: bool = any(c.type == "DisruptionTarget" for c in p.status.conditions or [])
    return terminating or disrupted


def test_rack_status_counts_devices_and_conditions(api: client.ApiClient) -> None:
    rack = get_rack(api, RACK)
    assert rack is not None
    status = rack["status"]
    assert status["devices"] == {"core": 144 * 14, "chip": 144, "server": 36, "ultraserver": 1}
    assert status["cores"]["total"] == 1152
    assert status["servers"]["summary"] == "36/36"
    assert condition(rack, "Ready")["status"] == "True"  # type: ignore[index]
    assert status["observedGeneration"] == rack["metadata"]["generation"]


def test_slices_read_as_core_ranges_of_chips_of_servers(api: client.ApiClient) -> None:
    by_name = {s["metadata"]["name"]: s for s in rack_slices(api, RACK)}
    server7 = by_name[f"{RACK}.server07.trainium.sim.dev"]
    assert "nodeName" not in server7["spec"]
    (term,) = server7["spec"]["nodeSelector"]["nodeSelectorTerms"]
    assert term["matchFields"] == [
        {"key": "metadata.name", "operator": "In", "values": [GEN2_NODES[7]]}
    ]
    device = next(d for d in server7["spec"]["devices"] if d["name"] == "server07-chip02-cores4-7")
    a = device["attributes"]
    assert (
        a["serverIndex"]["int"],
        a["chipIndex"]["int"],
        a["coreStart"]["int"],
        a["coreCount"]["int"],
    ) == (7, 2, 4, 4)
    assert a["rackChipIndex"]["int"] == 30 and a["chiplet"]["int"] == 1
    assert a["devicegroup4_id"]["int"] == 7 and a["devicegroup16_id"]["int"] == 1


def claim_status_devices(api: client.ApiClient, name: str) -> list[dict[str, Any]]:
    claim = custom(api).get_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims", name
    )
    devices: list[dict[str, Any]] = (claim.get("status") or {}).get("devices") or []
    return devices


def conditions_of(entry: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in entry["conditions"]}


def bound_node(api: client.ApiClient, name: str) -> str | None:
    node: str | None = client.CoreV1Api(api).read_namespaced_pod(name, NS).spec.node_name
    return node


def set_fabric(api: client.ApiClient, fabric: dict[str, Any] | None) -> None:
    custom(api).patch_cluster_custom_object(
        "trainium.sim.dev", "v1alpha1", "ultraservers", RACK, {"spec": {"fabric": fabric}}
    )


def test_server_binds_once_its_fabric_is_up_and_the_claim_shows_its_topology(
    api: client.ApiClient, claims: Claims
) -> None:
    published_device = next(
        d
        for s in rack_slices(api, RACK)
        for d in s["spec"].get("devices", [])
        if d["name"] == "server02"
    )
    assert published_device["bindingConditions"] == ["FabricReady"]
    assert published_device["bindingFailureConditions"] == ["FabricFailed"]
    on_server2 = 'device.attributes["trainium.sim.dev"].serverIndex == 2'
    name = claims.make("server", "fabric-up", extra_cel=on_server2)
    [result] = claims.allocated(name)
    assert wait_for("pod bound", lambda: bound_node(api, name)) == GEN2_NODES[2]
    [entry] = claim_status_devices(api, name)
    assert (entry["driver"], entry["pool"], entry["device"]) == (
        result["driver"],
        result["pool"],
        result["device"],
    )
    assert conditions_of(entry) == {"FabricReady": "True", "FabricFailed": "False"}
    assert entry["data"]["ring"] == [8, 9, 10, 11]  # Gen2: chips 4s..4s+3 of server s
    assert entry["networkData"]["interfaceName"] == "neuronlink0"
    assert len(set(entry["networkData"]["ips"])) == 4


def test_a_failed_fabric_unallocates_the_claim_and_the_scheduler_retries(
    api: client.ApiClient, claims: Claims
) -> None:
    set_fabric(api, {"failedServers": [5]})
    try:
        on_server5 = 'device.attributes["trainium.sim.dev"].serverIndex == 5'
        name = claims.make("server", "fabric-fail", extra_cel=on_server5)

        def failed() -> dict[str, Any] | None:
            entries = claim_status_devices(api, name)
            return next(
                (e for e in entries if conditions_of(e).get("FabricFailed") == "True"), None
            )

        entry = wait_for("FabricFailed in the claim's status", failed, 60, 0.1)
        [message] = {c["message"] for c in entry["conditions"]}
        assert "server05" in message and "failedServers" in message
        assert bound_node(api, name) is None

        def deallocated_once() -> bool:
            events = client.CoreV1Api(api).list_namespaced_event(
                NS, field_selector=f"involvedObject.name={name}"
            )
            return any("device binding failed" in (e.message or "") for e in events.items)

        wait_for("the scheduler's binding failure event", deallocated_once, 60)
        assert bound_node(api, name) is None
    finally:
        set_fabric(api, None)
    assert wait_for("pod bound after the fabric recovers", lambda: bound_node(api, name), 120)
    [entry] = claim_status_devices(api, name)
    assert conditions_of(entry) == {"FabricReady": "True", "FabricFailed": "False"}
