"""docs/reliability.md, rendered from benchmarks/results/chaos.json alone:
every figure on the page comes from that file."""

from typing import Any

from benchmarks.pages.common import conditions_note, table, tail_name

FULL_CASES = 10_000
"""The cases per edge the fuzz section aims at."""

INTRO = """# Reliability: faults, load and hostile input

What the driver does when the platform under it fails, when a rack is loaded
all at once, and when its inputs are malformed or hostile. Every figure below
is rendered by `make pages` (benchmarks/pages/reliability.py) from
`benchmarks/results/chaos.json`, which `benchmarks/chaos.py` writes; the
command under each section reproduces it. The fast cases of the same runs are
in `tests/chaos/` and run with `make test`.
"""

PLATFORM_HEADER = [
    "fault",
    "converge (s)",
    "devices duplicated",
    "devices lost",
    "claims prepared twice",
    "cores leaked",
    "pods wrongly evicted",
    "what happened",
]
LOAD_HEADER = [
    "round",
    "claims",
    "prepared",
    "unprepared",
    "errors",
    "checkpoint = live claims",
    "checkpoint empty after",
    "all running (s)",
    "all gone (s)",
    "daemon RSS after (MiB)",
    "daemon threads after",
]


def platform(result: dict[str, Any], cmd: str) -> str:
    rows = [
        [
            f["fault"],
            f"{f['converge_seconds']:.1f}",
            f["duplicated_devices"],
            f["lost_devices"],
            f["claims_prepared_twice"],
            f["leaked_cores"],
            f["pods_wrongly_evicted"],
            f["detail"],
        ]
        for f in result["faults"]
    ]
    return f"""## Platform faults

A local rack of {result["nodes"]} nodes with {result["pods"]} chip pods running,
each fault in turn. *Converge* is the time from the end of the fault (the
process restarted, the Node re-created, the daemon killed, the leader killed)
until a new claim is allocated and prepared and its pod runs, and the rack's
slices list exactly the devices they listed before; for the controller, until
the standby has published all ten new racks completely (it waits out the
leader's 15 s Lease first). The counts must all be 0; for the controller,
duplicated also counts slices of a stale pool generation left behind, and
lost counts devices missing from the ten racks.

{table(PLATFORM_HEADER, rows)}

Command: `{cmd}`
"""


REALKUBELET_HEADER = [
    "trial",
    "in checkpoint at kill",
    "prepares cut",
    "daemon back (s)",
    "all running (s)",
    "prepares by the new daemon",
    "cores handed twice",
    "claims on other devices",
    "checkpoint / CDI specs off the live claims",
    "cores leaked / CDI specs left after delete",
    "pods disturbed / lost the workload API",
    "slices replaced / devices duplicated / lost",
]


def realkubelet(result: dict[str, Any], cmd: str) -> str:
    rows = [
        [
            i + 1,
            f"{t['recorded_at_kill']} of {t['pods']}",
            t["prepares_cut"],
            f"{t['daemon_back_seconds']:.1f}",
            f"{t['all_running_seconds']:.1f}",
            "n/a" if t["restarted_daemon_prepares"] is None else t["restarted_daemon_prepares"],
            t["cores_handed_twice"],
            t["claims_with_other_devices"],
            f"{t['checkpoint_off_while_running']} / {t['cdi_off_while_running']}",
            f"{t['leaked_cores_after_delete']} / {t['cdi_left_after_delete']}",
            f"{t['pods_disturbed']} / {t['workload_api_lost']}",
            f"{t['slices_replaced']} / {t['devices_duplicated']} / {t['devices_lost']}",
        ]
        for i, t in enumerate(result["trials"])
    ]
    notes = [
        f"- trial {i + 1}: {'; '.join(t['detail'])}"
        for i, t in enumerate(result["trials"])
        if t["detail"]
    ]
    return f"""## Node daemon killed under the real kubelet

A real-nodes cluster of {result["nodes"]} nodes: real kubelets, containerd and
runc, the driver image running as the chart's DaemonSet pods. On
{result["node"]}, with {result["steady"]} chip pods running throughout,
{result["pods"]} pods with a whole-chip claim each are created at once and the
daemon is SIGKILLed at this trigger: {result["trigger"]}. The kubelet then
restarts its container; it backs off longer after each restart of the same
container, so later trials wait longer for the daemon.

*Prepares cut* counts the burst's pods whose prepare the kubelet reported
failed (a FailedPrepareDynamicResources event): calls in flight at the kill
or made while the daemon was down. *Daemon back* and *all running* are timed
from the kill. *Prepares by the new daemon* is the restarted daemon's own
request counter; with the claims recorded at the kill it exceeds the burst
when the kubelet asks again for a claim whose answer the kill cut, which the
daemon answers from its checkpoint.

Checked while the pods run: no core of the node is held by two claims in the
checkpoint or given to two containers by the CDI specs, each claim is
recorded with the devices the scheduler allocated, and the checkpoint and the
CDI specs hold exactly the claims of the node's pods. After the burst is
deleted, nothing of it is left. Disturbed pods are steady or burst pods
deleted, replaced or with a restarted container; once the burst runs, each of
them runs `trainium-dra workload` again inside its container (`kubectl exec`)
and must reach its claim on the daemon's workload API. All counts must be 0.

{table(REALKUBELET_HEADER, rows)}

{chr(10).join(notes) if notes else "Nothing was disturbed."}

Command: `{cmd}`
"""


def load(result: dict[str, Any], cmd: str) -> str:
    rows = [
        [
            i + 1,
            r["claims"],
            r["prepared"],
            r["unprepared"],
            r["request_errors"],
            "yes" if r["checkpoint_matches_when_running"] else "NO",
            "yes" if r["checkpoint_empty_after_delete"] else "NO",
            f"{r['running_seconds']:.0f}",
            f"{r['deleted_seconds']:.0f}",
            f"{r['daemon_rss_mib']:.1f}",
            r.get("daemon_threads", "not counted"),
        ]
        for i, r in enumerate(result["rounds"])
    ]
    bad = result["bad_log_lines"]
    logs = "none" if not bad else f"{len(bad)}, first: `{bad[0][:160]}`"
    rss = [r["daemon_rss_mib"] for r in result["rounds"]]
    growth = (
        f"from the end of the first round to the end of the last: {rss[-1] - rss[0]:+.1f} MiB, "
        f"{(rss[-1] - rss[0]) / (len(rss) - 1):+.1f} MiB a round (the first round also "
        "starts the gRPC worker threads and their apiserver connections)"
        if len(rss) > 1
        else "one round only"
    )
    return f"""## Load

{result["claims"]} single-core claims with a pod each, created at once on one
rack and deleted at once, {len(result["rounds"])} rounds. Prepared and
unprepared count the daemon's own request counters; the checkpoint columns
compare the daemons' checkpoints with the live claims while the pods run and
after they are gone.

{table(LOAD_HEADER, rows)}

Daemon RSS before the first round: {result["daemon_rss_start_mib"]} MiB; {growth}.
ERROR lines or tracebacks in the controller's and the daemon's logs: {logs}.

Command: `{cmd}`
"""


def reaction(result: dict[str, Any], cmd: str) -> str:
    rows = [
        ["taint in the slice", *(result[f"taint_{k}"] for k in ("p50_s", "p99_s", "goal_s"))],
        ["pod evicted", *(result[f"eviction_{k}"] for k in ("p50_s", "p99_s", "goal_s"))],
    ]
    tail = tail_name(result["trials"])
    return f"""## Time to react to a failed device

An uncorrectable HBM error injected on the chip a running pod holds; timed
from the injection to the first device taint in the rack's slices, and to the
pod's eviction (its deletion by the device-taint eviction controller), over
{result["trials"]} trials. Both are seen through watches opened before the
injection (on the driver's slices and on the pod), so each time is when the
apiserver served the change, not when a poll happened to find it.

{table(["", "p50 (s)", f"{tail} (s)", "goal (s)"], rows)}

Command: `{cmd}`
"""


def fuzz(result: dict[str, Any], cmd: str) -> str:
    rows = [
        [
            e["edge"],
            e["cases"],
            e.get("rounds") or e["cases"],
            e["accepted"],
            e["refused"],
            e["crashes"],
            e["hangs"],
            f"{e['seconds']:.0f}",
        ]
        for e in result["edges"]
    ]
    header = ["edge", "cases", "rounds", "accepted", "refused", "crashes", "hangs", "seconds"]
    failures = [f"- {e['edge']}: `{e['failure'][:300]}`" for e in result["edges"] if e["failure"]]
    reruns = [
        f"- {e['edge']} ran again with `{e['command']}`." for e in result["edges"] if "command" in e
    ]
    restore = (
        f"Slices edited live were put back in {result['slice_restore_p50_s']} s (median), "
        f"{result['slice_restore_max_s']} s at most."
        if result.get("slice_restore_p50_s") is not None
        else ""
    )
    kept = {True: "yes", False: "NO", None: "not run yet"}[result["kept_claim_intact"]]
    short = [e for e in result["edges"] if e["cases"] < FULL_CASES]
    return f"""## Hostile and malformed input

Property-based fuzzing (hypothesis) of every input edge. A case passes when
the code under test neither crashes nor hangs, refuses bad input with a
message that starts with the field and says the allowed values, and accepts
only well-typed input. The daemon edges run against the real daemon process
with one claim kept prepared throughout; it was still prepared at the end:
{kept}. {restore}
Live edits the controller did not put back within 60 s: {len(result["unrestored_edits"])}.

{table(header, rows)}

{chr(10).join(failures) if failures else "No failures."}
{chr(10).join(reruns)}

A round is one input hypothesis generated. Where a case costs a slow step
of a real process, several cases share it: the CDI edge places
{result.get("cdi_batch", 1)} foreign file sets at once around one prepare
and unprepare of a claim, then checks every set is as it was and the kept
claim intact; the live slice edge writes {result.get("edit_batch", 1)} edit
lists one after another (each to the slices as they are then, while the
controller may be restoring an earlier one) and then waits until the
controller has put the pool back.

Edges below {FULL_CASES:,} cases in this run:
{chr(10).join(f"- {e['edge']}: {e['cases']}, {why(e)}" for e in short) or "none."}

Command: `{cmd}`
"""


def why(edge: dict[str, Any]) -> str:
    """Why an edge runs fewer cases, with its own cost per case."""
    each = edge["seconds"] / max(1, edge["cases"])
    if edge["edge"] == "damaged checkpoint at daemon start":
        return (
            f"a fresh daemon process per case ({each:.1f} s each); the same damaged files "
            "go through the daemon's own start-up steps in process (checkpoint and journal "
            "opened, unfinished records dropped, every claim's files rewritten) in the "
            '"at start (in process)" row.'
        )
    if edge["edge"] == "slice edited (live controller)":
        return (
            f"{each:.2f} s per edit list (a read of the pool, the writes, and the "
            "controller's own rewrite of the pool on the same cores); the plan that "
            'restores the pool is fuzzed in process in the "controller plan" row.'
        )
    return "fewer cases asked for in the command."


SECTIONS = {
    "platform": platform,
    "realkubelet": realkubelet,
    "load": load,
    "reaction": reaction,
    "fuzz": fuzz,
}


def render(data: dict[str, Any]) -> str:
    """The whole page; each section says the conditions it ran under."""
    m = data["machine"]
    parts = [
        INTRO,
        f"Last run: {m['date']}, {m['cpus']} CPUs, Python {m['python']}; a machine shared "
        "with other work, so the times are an upper bound.\n",
    ]
    conditions = data.get("conditions") or {}
    for name, write in SECTIONS.items():
        if name in data.get("results", {}):
            parts.append(write(data["results"][name], data["commands"][name]))
            note = conditions_note(conditions.get(name), "benchmarks/results/chaos.json", m["date"])
            parts.append(note + "\n")
    return "\n".join(parts)
