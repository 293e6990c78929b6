"""The `controller` section of docs/bench-controller.md, from
benchmarks/results/controller.json: publishing beside the upstream controller."""

import statistics
from collections.abc import Sequence
from typing import Any

from benchmarks.pages.common import conditions_note, median, row, single_runs, spread, values

MIB = 2**20


def ours_runs(point: dict[str, Any]) -> list[dict[str, Any]]:
    """Our controller's runs at one rack count (older results kept one, flat)."""
    runs: list[dict[str, Any]] = point.get("runs") or [point]
    return runs


def anchor_runs(point: dict[str, Any]) -> list[dict[str, Any]]:
    """The upstream controller's runs at one rack count."""
    runs: list[dict[str, Any]] = point.get("anchor_runs") or (
        [point["anchor"]] if point.get("anchor") else []
    )
    return runs


def counts(xs: Sequence[float]) -> str:
    """A count every run should agree on; a disagreement shows as a range."""
    low, high = min(xs), max(xs)
    return f"{low:g}" if low == high else f"{low:g}\u2013{high:g}"


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs else "n/a"


def cells(runs: list[dict[str, Any]], key: str) -> str:
    present = [r for r in runs if r.get(key) is not None]
    return spread(values(present, key)) if present else "n/a"


def middle(runs: list[dict[str, Any]], key: str) -> float:
    present = [r for r in runs if r.get(key) is not None]
    return median(present, key) if present else 0.0


def publish_table(points: list[dict[str, Any]]) -> list[str]:
    lines = [
        row(
            "racks",
            "slices",
            "ours s",
            "upstream s",
            "ours / upstream",
            "ours CPU s",
            "upstream CPU s",
            "slice writes",
            "status writes",
            "apiserver: slice writes",
            "apiserver: slice LISTs",
        ),
        row(*["---"] * 11),
    ]
    for p in points:
        ours, theirs = ours_runs(p), anchor_runs(p)
        lines.append(
            row(
                p["racks"],
                ours[0]["slices"],
                cells(ours, "seconds"),
                cells(theirs, "seconds"),
                ratio(middle(ours, "seconds"), middle(theirs, "seconds")),
                cells(ours, "controller_cpu_seconds"),
                cells(theirs, "cpu_seconds"),
                counts(values(ours, "slice_writes")),
                counts(values(ours, "status_writes")),
                counts(values(ours, "apiserver_slice_writes")),
                counts([r["requests"].get("resourceslices LIST", 0) for r in ours]),
            )
        )
    return lines


def noop_table(points: list[dict[str, Any]]) -> list[str]:
    lines = [
        row(
            "racks",
            "reconciles",
            "unchanged",
            "rebuilt",
            "slice LISTs",
            "writes",
            "apiserver: LISTs / writes",
            "ours ms/rack",
            "upstream ms/rack",
            "ours / upstream",
            "racks/s, one worker",
        ),
        row(*["---"] * 11),
    ]
    for p in points:
        idle = [r["noop_resync"] for r in ours_runs(p) if r.get("noop_resync")]
        if not idle:
            continue
        theirs = anchor_runs(p)
        per_rack = middle(idle, "ms_per_rack")
        lines.append(
            row(
                p["racks"],
                counts(values(idle, "reconciles")),
                counts(values(idle, "unchanged")),
                counts(values(idle, "rebuilt")),
                counts(values(idle, "slice_lists")),
                counts(values(idle, "writes")),
                f"{counts(values(idle, 'apiserver_slice_lists'))} / "
                f"{counts(values(idle, 'apiserver_writes'))}",
                cells(idle, "ms_per_rack"),
                cells(theirs, "noop_ms_per_rack"),
                ratio(per_rack, middle(theirs, "noop_ms_per_rack")),
                f"{1000 / per_rack:.0f}" if per_rack else "n/a",
            )
        )
    return lines


MEMORY_READINGS = (
    "controller_rss_bytes",
    "controller_peak_rss_bytes",
    "controller_rss_after_bytes",
)
"""Our controller's resident size when every rack is Ready, the kernel's
high-water mark then, and its resident size after the resyncs and the change."""


def memory(point: dict[str, Any]) -> list[str]:
    ours = ours_runs(point)
    readings = [r[k] for r in ours for k in MEMORY_READINGS if r.get(k)]
    if not readings:
        return []
    ready = statistics.median(r["controller_rss_bytes"] for r in ours) / MIB
    lines = [
        "",
        f"Memory with {point['racks']} racks published: our controller "
        f"{ready:.0f} MiB resident when every rack is Ready; the largest of its readings "
        f"in the run (the kernel's high-water mark then, and the resident size after the "
        f"no-op resyncs{' and the change' if point.get('one_rack_change') else ''}) "
        f"{max(readings) / MIB:.0f} MiB.",
    ]
    theirs = anchor_runs(point)
    heap = [r for r in theirs if r.get("heap_inuse_bytes")]
    if heap:
        lines.append(
            "The upstream controller, read at the same moment (its last slice created): "
            f"{median(heap, 'heap_inuse_bytes') / MIB:.0f} MiB of Go heap in use after a "
            "forced collection, the harness's own copies of its input dropped first "
            f"(the process then {median(heap, 'rss_bytes') / MIB:.0f} MiB resident). The "
            "Go heap leaves out the binary and the runtime that a resident size counts, "
            "so it is the smaller of the two measures."
        )
    elif any(r.get("rss_bytes_withdrawn") for r in theirs):
        lines.append(
            "The upstream controller's memory is withdrawn until the next run: this run "
            "recorded the resident size of the whole anchor harness after its no-op "
            "rounds, which holds the harness's own decoded input and the copies it hands "
            "the controller on every round, so it said nothing about the upstream "
            "controller. The harness now reads the Go heap in use after a forced "
            "collection when its last slice is created, as ours is read, without its "
            "own copies."
        )
    return lines


def render(payload: dict[str, Any]) -> str:
    """The section's body for the results of `benchmarks.controller`."""
    points: list[dict[str, Any]] = payload["results"].get("publish") or []
    if not points:
        return "No publishing run recorded."
    resync = payload["results"].get("resync", {"seconds": 5, "workers": 4, "periods": 3})
    lines = [
        "Publishing Trn3 Gen2 racks (2,197 devices, 42 slices each) from cold: ours from",
        "starting the controller process to every rack Ready (status written); the",
        "upstream Go ResourceSlice controller (`k8s.io/dynamic-resource-allocation`",
        "v0.36.3 in hack/slice-anchor, no client-side rate limit, one worker as upstream",
        "runs it) from its start to its last slice created, publishing the same devices",
        "and counters built by our slice builder (upstream sets one node selection per",
        "pool, so `allNodes`). Same apiserver, same run, one after the other; etcd and",
        "kube-apiserver only (no scheduler or controller-manager caching every slice). Writes are",
        "the controller's own count (`trainium_dra_controller_writes_total`); the",
        "apiserver's `apiserver_request_total` counts every client over the same time.",
        "CPU is the controller process's own (user + system). Where a rack count was",
        "published more than once (ours and upstream in turn), times are the median",
        "with the range in brackets:",
        "",
        *publish_table(points),
        *single_runs([len(ours_runs(p)) for p in points] + [len(anchor_runs(p)) for p in points]),
    ]
    if any(r.get("noop_resync") for p in points for r in ours_runs(p)):
        lines += [
            "",
            f"No-op resyncs: the {resync['seconds']:.0f} s resync queues every rack "
            f"({resync['workers']} workers, {resync['periods']} periods),",
            "nothing changed. Time per rack is the controller's reconcile histogram; the",
            "upstream controller's is its sync of an unchanged pool after `Update` with the",
            "same resources. LISTs and writes are the controller's own counters; the",
            "apiserver column counts slice LISTs and slice/UltraServer writes it served:",
            "",
            *noop_table(points),
            *single_runs([len(ours_runs(p)) for p in points]),
        ]
    last = points[-1]
    change = last.get("one_rack_change")
    if change:
        lines += [
            "",
            f"One rack's change, {last['racks']} racks published (a chip of one server of the",
            "first rack reported failed; its devices, its server and the rack-wide device",
            f"gain a taint): {change['slice_writes']} slice writes, "
            f"{change['slices_written']} slices with a",
            f"new resourceVersion, all in racks: {', '.join(change['racks_written']) or 'none'}.",
        ]
    lines += memory(last)
    lines += busy_table(payload["results"].get("busy"))
    return "\n".join(lines).rstrip("\n") + "\n"


def busy_table(busy: dict[str, Any] | None) -> list[str]:
    """The controller's CPU and writes per claim as a fleet fills, with the
    run that measured them (it may run apart from the rest)."""
    if not busy:
        return []
    bands = busy["bands"]
    kinds = list(bands[0]["writes_per_claim"])
    return [
        "",
        "### A fleet filling up",
        "",
        f"{bands[0]['racks']} racks published by the controller, then claims written",
        "already allocated (the scheduler benchmark's mix of servers, chips and core",
        "partitions) in two bands, 0 to 50% and 50 to 90% of the cores, each measured",
        "until the controller has written nothing for a few seconds: its CPU and its",
        "writes per claim of the band (slices: rack devices withdrawn or advertised;",
        "claim status: the fabric of server and rack claims, and the addresses of",
        "core and chip claims; rack status: the UltraServer's counts), with the",
        "controller's `--publishing` plain and `order` (blocked devices last in each",
        "slice; a run before that choice existed published plain).",
        f"Command: `{busy['command']}` — {busy['date']}.",
        "",
        conditions_note(
            busy.get("conditions"), "benchmarks/results/controller.json, its busy step"
        ),
        "",
        row(
            "pools",
            "publishing",
            "held",
            "claims",
            "seconds",
            "CPU ms/claim",
            *(f"{k}/claim" for k in kinds),
        ),
        row(*["---"] * (6 + len(kinds))),
        *(
            row(
                b["pools"],
                b.get("publishing", "plain"),
                f"{b['held_percent']}%",
                b["claims"],
                b["seconds"],
                b["cpu_ms_per_claim"],
                *(b["writes_per_claim"][k] for k in kinds),
            )
            for b in bands
        ),
        *single_runs([1] * len(bands)),
    ]
