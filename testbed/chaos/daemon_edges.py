"""The node daemon's live input edges, fuzzed against the real process:

- the workload API, over its real unix socket;
- a corrupt or truncated checkpoint at start;
- a CDI directory holding foreign files while claims come and go.

A `Prepared` daemon holds one claim prepared for the whole run ("kept"):
whatever the input, that claim must stay prepared and the daemon alive.
"""

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import strategies as st

from driver.node import cdi
from driver.node.durable.checkpoint import PREPARE_COMPLETED, Checkpoint
from localsim.controlplane.plane import ControlPlane
from localsim.standin.kubelet import KubeletStandIn
from simdevice.workloads import KINDS
from testbed.chaos.fuzzing import ACCEPTED, HANG, JSON_VALUES, REFUSED, either, maybe_field
from testbed.chaos.parser_edges import corrupt
from testbed.daemon import Daemon, short_tmpdir
from testbed.rack import DRIVER, SITE, published_rack

CHIP = f'device.attributes["{DRIVER}"].resourceType == "chip"'
REQUEST_TIMEOUT = 20.0
ClaimRef = tuple[str, str, str]


@dataclass
class Prepared:
    daemon: Daemon
    kubelet: KubeletStandIn
    node: str
    kept: list[ClaimRef]
    token: str
    cycled: list[ClaimRef]

    @property
    def kept_uid(self) -> str:
        return self.kept[0][1]

    def kept_intact(self) -> bool:
        """The daemon runs and the kept claim is still prepared, spec file included."""
        paths = self.daemon.paths(self.node)
        record = Checkpoint(paths.checkpoint).claims.get(self.kept_uid)
        alive = self.daemon.proc is not None and self.daemon.proc.poll() is None
        spec = cdi.spec_path(paths.cdi_dir, DRIVER, self.kept_uid)
        return alive and record is not None and record.state == PREPARE_COMPLETED and spec.exists()


@contextlib.contextmanager
def prepared_daemon(plane: ControlPlane) -> Iterator[Prepared]:
    """The node daemon with two allocated claims on one node, the first prepared."""
    with published_rack(plane) as rack, short_tmpdir() as workdir:
        node = SITE.nodes[0]
        pods = {}
        for name in ("kept", "cycled"):
            rack.create_claim(f"fuzz-{name}", selector=CHIP)
            rack.create_pod(f"fuzz-{name}", f"fuzz-{name}", node=node)
            pods[name] = rack.bound_pod(f"fuzz-{name}")
        daemon = Daemon(workdir, plane.kubeconfig).start()
        try:
            kubelet = daemon.kubelet(node)
            kept = kubelet.pod_claims(rack.objects, pods["kept"])
            kubelet.prepare(kept)
            token = daemon.paths(node).token_file(kept[0][1]).read_text().strip()
            cycled = kubelet.pod_claims(rack.objects, pods["cycled"])
            yield Prepared(daemon, kubelet, node, kept, token, cycled)
        finally:
            daemon.stop()


# --- the workload API ---------------------------------------------------------

small = st.integers(1, 512)
workloads = maybe_field(
    {
        "kind": either(st.sampled_from(KINDS), "GEMM"),
        **{f: either(small, 0, -1, 2**41) for f in ("m", "n", "k", "rows", "cols", "seq")},
        "hidden": either(st.sampled_from([128, 256, 384])),
        "bytes": either(st.integers(1, 2**20)),
        "iterations": either(st.integers(1, 3), 0, 10**10),
        "numerics": either(st.booleans()),
        "dtype": either(st.sampled_from(["bf16", "fp32", "fp8"])),
    }
)
job_bodies = maybe_field(
    {"workload": either(workloads), "cores": either(st.lists(st.integers(-2, 300), max_size=4))}
)
requests = st.tuples(
    st.sampled_from(["GET", "POST", "DELETE", "PUT"]),
    st.sampled_from(["claim", "jobs", "job", "other-claim", "junk"]),
    st.sampled_from(["valid", "wrong", "none", "scheme"]),
    st.one_of(job_bodies, job_bodies, JSON_VALUES, st.binary(max_size=64)),
    st.text(max_size=12),
)
FIELD_WORDS = ("cores", "workload", "Authorization", "claim", "job", "Not Found", "Method Not")


def workload_client(prepared: Prepared) -> httpx.Client:
    socket_path = prepared.daemon.paths(prepared.node).workload_socket
    transport = httpx.HTTPTransport(uds=str(socket_path))
    return httpx.Client(transport=transport, base_url="http://workload", timeout=REQUEST_TIMEOUT)


def request_path(target: str, uid: str, junk: str) -> str:
    return {
        "claim": f"/v1/claims/{uid}",
        "jobs": f"/v1/claims/{uid}/jobs",
        "job": f"/v1/claims/{uid}/jobs/{quote(junk, safe='')}",
        "other-claim": f"/v1/claims/{uuid.uuid4()}/jobs",
        "junk": "/" + quote(junk, safe=""),
    }[target]


def headers(auth: str, token: str) -> dict[str, str]:
    return {
        "valid": {"Authorization": f"Bearer {token}"},
        "wrong": {"Authorization": "Bearer " + "x" * len(token)},
        "none": {},
        "scheme": {"Authorization": f"Basic {token}"},
    }[auth]


def check_refusal(response: httpx.Response) -> None:
    detail = response.json().get("detail")
    if isinstance(detail, list):  # the request model's own validation
        assert all(item.get("loc") and item.get("msg") for item in detail), detail
    else:
        assert isinstance(detail, str) and detail.startswith(FIELD_WORDS), detail


def check_workload_request(
    prepared: Prepared, http: httpx.Client, case: tuple[str, str, str, Any, str]
) -> str:
    method, target, auth, body, junk = case
    path = request_path(target, prepared.kept_uid, junk)
    content = body if isinstance(body, bytes) else None
    try:
        response = http.request(
            method,
            path,
            headers=headers(auth, prepared.token),
            json=None if content is not None else body,
            content=content,
        )
    except httpx.TimeoutException:
        assert prepared.kept_intact(), "the daemon died or lost the kept claim"
        return HANG
    assert response.status_code < 500, (response.status_code, response.text[:300])
    if response.status_code == 201:
        job = response.json()["id"]
        cancel = http.delete(
            f"/v1/claims/{prepared.kept_uid}/jobs/{job}", headers=headers("valid", prepared.token)
        )
        assert cancel.status_code == 200, cancel.text
    if response.status_code >= 400:
        check_refusal(response)
        return REFUSED
    return ACCEPTED


# --- a checkpoint at start ------------------------------------------------------

CHECKPOINT_FIXES = ("move it aside", "written by another release")


def check_checkpoint_start(plane: ControlPlane, case: Any) -> str:
    """A fresh daemon over a damaged checkpoint: starts or refuses by name; never
    rewrites the file it refused."""
    data = corrupt(case)
    with short_tmpdir() as workdir:
        daemon = Daemon(workdir, plane.kubeconfig)
        path = daemon.paths(SITE.nodes[0]).checkpoint
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        try:
            daemon.start(timeout=60)
        except AssertionError as err:
            log = "".join(daemon.stderr)
            assert "Traceback" not in log, log[-2000:]
            assert str(path) in log and any(f in log for f in CHECKPOINT_FIXES), str(err)
            assert path.read_bytes() == data, "a refused checkpoint was rewritten"
            return REFUSED
        assert daemon.stop() == 0
        return ACCEPTED


# --- foreign files in the CDI directory ---------------------------------------

names = st.one_of(
    st.text(
        alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=["Cs"]),
        min_size=1,
        max_size=30,
    ).filter(lambda n: n not in (".", "..")),
    st.uuids().map(lambda u: f"k8s.{DRIVER}-claim_{u}.json"),
    st.uuids().map(lambda u: f".k8s.{DRIVER}-claim_{u}.json.tmp"),
)
foreign_sets = st.lists(
    st.tuples(names, st.sampled_from(["file", "dir", "symlink"]), st.binary(max_size=128)),
    max_size=5,
    unique_by=lambda entry: entry[0],
)


def snapshot(cdi_dir: Path, entries: list[str]) -> dict[str, tuple[str, bytes | str]]:
    out: dict[str, tuple[str, bytes | str]] = {}
    for name in entries:
        path = cdi_dir / name
        if path.is_symlink():
            out[name] = ("symlink", os.readlink(path))
        elif path.is_dir():
            out[name] = ("dir", "")
        elif path.exists():
            out[name] = ("file", path.read_bytes())
    return out


def place(cdi_dir: Path, entries: list[tuple[str, str, bytes]], ours: set[str]) -> list[str]:
    placed = []
    for name, kind, content in entries:
        path = cdi_dir / name
        if name in ours or os.path.lexists(path) or len(name.encode()) > 200:
            continue
        if kind == "dir":
            path.mkdir()
        elif kind == "symlink":
            path.symlink_to(sorted(ours)[0])
        else:
            path.write_bytes(content)
        placed.append(name)
    return placed


def remove(cdi_dir: Path, entries: list[str]) -> None:
    for name in entries:
        path = cdi_dir / name
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()


def foreign_batches(size: int) -> st.SearchStrategy[list[list[tuple[str, str, bytes]]]]:
    """`size` foreign sets at once: each is one case; they share one prepare cycle."""
    return st.lists(foreign_sets, min_size=size, max_size=size)


def check_cdi_foreign(prepared: Prepared, batch: list[list[tuple[str, str, bytes]]]) -> list[str]:
    """Foreign files next to ours: a claim prepared and unprepared leaves every
    set as it was. A set whose names were all taken (by ours or an earlier set
    of the batch) places nothing and counts as refused."""
    cdi_dir = prepared.daemon.paths(prepared.node).cdi_dir
    cycled_uid = prepared.cycled[0][1]
    ours = {cdi.spec_path(cdi_dir, DRIVER, uid).name for uid in (prepared.kept_uid, cycled_uid)}
    placed: list[list[str]] = []
    try:
        for entries in batch:
            placed.append(place(cdi_dir, entries, ours))
        before = [snapshot(cdi_dir, names) for names in placed]
        prepared.kubelet.prepare(prepared.cycled)
        assert cdi.spec_path(cdi_dir, DRIVER, cycled_uid).exists()
        prepared.kubelet.unprepare(prepared.cycled)
        assert not cdi.spec_path(cdi_dir, DRIVER, cycled_uid).exists()
        for names, was in zip(placed, before, strict=True):
            assert snapshot(cdi_dir, names) == was, f"a foreign CDI file was changed: {names}"
        assert prepared.kept_intact(), "the daemon died or lost the kept claim"
    finally:
        for names in placed:
            remove(cdi_dir, names)
    return [ACCEPTED if names else REFUSED for names in placed]
