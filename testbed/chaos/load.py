"""Many claims created at once on one rack and deleted at once, round after
round: every prepare has its unprepare, the daemon's checkpoints hold exactly
the live claims after each round, its memory stays flat, its log stays clean."""

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from testbed.chaos.localrack import ChaosCluster
from testbed.chaos.workload import create_many, delete_all, live_claims, wait_running
from testbed.controlplane import metric_samples
from testbed.waiting import wait_for

NAMESPACE = "chaos-load"
BAD_LOG_WORDS = (" ERROR ", "Traceback")


@dataclass(frozen=True)
class Round:
    claims: int
    prepared: int
    unprepared: int
    request_errors: int
    checkpoint_matches_when_running: bool
    checkpoint_empty_after_delete: bool
    running_seconds: float
    deleted_seconds: float
    daemon_rss_mib: float
    daemon_threads: int


def proc_status(pid: int, field: str) -> int:
    """The first number of a /proc/<pid>/status line, e.g. VmRSS (KiB) or Threads."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


def rss_mib(pid: int) -> float:
    return proc_status(pid, "VmRSS") / 1024


def daemon_counts(url: str) -> dict[str, float]:
    """Claims the daemon prepared, unprepared, and failed to, summed over its nodes."""
    samples = metric_samples(httpx.get(f"{url}/metrics", timeout=10).text)
    out = {"prepare": 0.0, "unprepare": 0.0, "errors": 0.0}
    for (name, labels), value in samples.items():
        operation = dict(labels).get("operation", "")
        if name == "trainium_dra_node_requests_total":
            out[operation] += value
        elif name == "trainium_dra_node_request_errors_total":
            out["errors"] += value
    return out


def checkpointed(cluster: ChaosCluster) -> set[str]:
    return {uid for claims in cluster.checkpoints().values() for uid in claims}


def one_round(cluster: ChaosCluster, claims: int, index: int) -> Round:
    api, url = cluster.api, cluster.daemon_url()
    names = [f"r{index}-c{i}" for i in range(claims)]
    before = daemon_counts(url)
    started = time.monotonic()
    create_many(api, NAMESPACE, names, "core")
    wait_running(api, NAMESPACE, names, timeout=1800)
    running_seconds = time.monotonic() - started
    live = {uid for uid, name in live_claims(api).items() if name.startswith(f"{NAMESPACE}/")}
    matches = checkpointed(cluster) == live
    started = time.monotonic()
    delete_all(api, NAMESPACE, timeout=1800)
    wait_for("the checkpoints emptied", lambda: not checkpointed(cluster), 600, interval=0.5)
    deleted_seconds = time.monotonic() - started
    after = daemon_counts(url)
    return Round(
        claims=claims,
        prepared=int(after["prepare"] - before["prepare"]),
        unprepared=int(after["unprepare"] - before["unprepare"]),
        request_errors=int(after["errors"] - before["errors"]),
        checkpoint_matches_when_running=matches,
        checkpoint_empty_after_delete=not checkpointed(cluster),
        running_seconds=running_seconds,
        deleted_seconds=deleted_seconds,
        daemon_rss_mib=rss_mib(cluster.pid(f"node-{cluster.rack.name}")),
        daemon_threads=proc_status(cluster.pid(f"node-{cluster.rack.name}"), "Threads"),
    )


def bad_log_lines(cluster: ChaosCluster) -> list[str]:
    """ERROR lines and tracebacks in the controller's and the daemons' logs."""
    driver_logs = [
        p for p in cluster.logs() if p.stem == "controller" or p.stem.startswith("node-")
    ]
    return [
        f"{path.name}: {line}"
        for path in driver_logs
        for line in path.read_text(errors="replace").splitlines()
        if any(word in line for word in BAD_LOG_WORDS)
    ]


def load_rounds(cluster: ChaosCluster, claims: int, rounds: int) -> dict[str, Any]:
    rss_start = rss_mib(cluster.pid(f"node-{cluster.rack.name}"))
    done = [one_round(cluster, claims, i) for i in range(rounds)]
    return {
        "claims": claims,
        "rounds": [asdict(r) for r in done],
        "daemon_rss_start_mib": round(rss_start, 1),
        "bad_log_lines": bad_log_lines(cluster)[:20],
    }
