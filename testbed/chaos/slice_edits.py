"""Slices edited by someone else, live: the real controller must put them back.

The edits are the ones of `parser_edges.edit_pool`, written to the apiserver
(which refuses some of them itself), several edit lists a round; the
controller runs with the chart's resync period, so a restore comes from its
reaction to the edits, not from a periodic full pass.
"""

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from kubernetes import client

from driver.controller.writeplan import same
from driver.jsontypes import JSON
from localsim.controlplane.plane import ControlPlane
from testbed.chaos.fuzzing import ACCEPTED, HANG, REFUSED
from testbed.chaos.parser_edges import edit_pool
from testbed.chaos.parser_edges import slice_edits as edit_lists
from testbed.controlplane import controller, install, rack_slices, ultraserver
from testbed.waiting import wait_for

RACK = "chaos-edit"
NODES = [f"chaos-edit-n{i}" for i in range(4)]
RESYNC_SECONDS = "300"
RESTORE_TIMEOUT = 60.0


@dataclass
class LiveRack:
    api: client.ApiClient
    baseline: dict[str, JSON]
    restore_seconds: list[float]
    unrestored: list[object]


def restored(api: client.ApiClient, baseline: dict[str, JSON]) -> bool:
    now = {s["metadata"]["name"]: s for s in rack_slices(api, RACK)}
    if (
        set(now) != set(baseline)
        or len({s["spec"]["pool"]["generation"] for s in now.values()}) != 1
    ):
        return False
    return all(
        same({**want, "spec": {**want["spec"], "pool": now[name]["spec"]["pool"]}}, now[name])
        for name, want in baseline.items()
    )


@contextlib.contextmanager
def live_rack(plane: ControlPlane, log: Path) -> Iterator[LiveRack]:
    """A published trn3-gen1 rack and its controller; removed afterwards."""
    install(plane)
    for node in NODES:
        plane.create_node(node)
    api = plane.api_client()
    objects = client.CustomObjectsApi(api)
    args = ("--resync-seconds", RESYNC_SECONDS, "--lease-name", RACK, "--lease-seconds", "6")
    try:
        with controller(plane, log, *args):
            objects.create_cluster_custom_object(
                "trainium.sim.dev",
                "v1alpha1",
                "ultraservers",
                ultraserver(RACK, "trn3-gen1", NODES),
            )
            first = wait_for("the rack published", lambda: _settled(api), 120, interval=0.5)
            yield LiveRack(api, first, [], [])
            objects.delete_cluster_custom_object(
                "trainium.sim.dev", "v1alpha1", "ultraservers", RACK
            )
            wait_for("the rack's slices gone", lambda: not rack_slices(api, RACK), 120)
    finally:
        for node in NODES:
            with contextlib.suppress(client.ApiException):
                plane.delete_node(node)
        api.close()


def _settled(api: client.ApiClient) -> dict[str, JSON] | None:
    """The rack's slices once two reads a second apart agree."""
    first = {s["metadata"]["name"]: s for s in rack_slices(api, RACK)}
    time.sleep(1.0)
    second = {s["metadata"]["name"]: s for s in rack_slices(api, RACK)}
    if not first or {k: v["metadata"]["resourceVersion"] for k, v in first.items()} != {
        k: v["metadata"]["resourceVersion"] for k, v in second.items()
    }:
        return None
    return second


def write_edits(api: client.ApiClient, current: list[JSON], edited: list[JSON]) -> int:
    """Write someone else's edits; returns how many the apiserver took."""
    resource = client.ResourceV1Api(api)
    after = {s["metadata"]["name"]: s for s in edited}
    taken = 0
    for s in current:
        name = s["metadata"]["name"]
        try:
            if name not in after:
                answer = resource.delete_resource_slice(name, _preload_content=False)
            elif after[name] != s:
                answer = resource.replace_resource_slice(name, after[name], _preload_content=False)
            else:
                continue
            answer.drain_conn()  # not decoded into models: that costs more than the write
            answer.release_conn()
        except client.ApiException as err:
            if err.status not in (409, 422):
                raise
            continue
        taken += 1
    return taken


def edit_rounds(size: int) -> st.SearchStrategy[list[list[tuple[str, int, int, Any]]]]:
    """`size` edit lists written one after another: each is one case; the
    controller must have put the pool back once the round's writes are done."""
    return st.lists(edit_lists, min_size=size, max_size=size)


def check_live_round(rack: LiveRack, batch: list[list[tuple[str, int, int, Any]]]) -> list[str]:
    """Each edit list applied to the slices as they are then (the controller
    may be restoring an earlier one meanwhile); one wait for the restore."""
    taken = []
    for edits in batch:
        current = json.loads(json.dumps(rack_slices(rack.api, RACK)))
        taken.append(write_edits(rack.api, current, edit_pool(current, edits)))
    started = time.monotonic()
    try:
        wait_for(
            "the controller to restore the slices",
            lambda: restored(rack.api, rack.baseline),
            RESTORE_TIMEOUT,
            interval=0.1,
        )
    except AssertionError:
        rack.unrestored.append(batch)
        return [HANG] * len(batch)
    if any(taken):
        rack.restore_seconds.append(time.monotonic() - started)
    return [ACCEPTED if n else REFUSED for n in taken]


def check_live_edit(rack: LiveRack, edits: list[tuple[str, int, int, Any]]) -> str:
    return check_live_round(rack, [edits])[0]
