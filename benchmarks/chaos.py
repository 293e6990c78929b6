"""Reliability under faults, load and hostile input, with figures.

Runs the chaos cases of tests/chaos at full size: platform faults on a whole
Trn3 Gen2 rack with pods running, 1,152 claims created and deleted at once
three times, fault-to-taint-to-eviction timing over 50 trials, and every input
edge fuzzed. Each section's results are merged into
benchmarks/results/chaos.json (so sections can run separately with --only)
and docs/reliability.md is written from that file.
"""

import argparse
import contextlib
import json
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from benchmarks import render
from benchmarks.paths import RESULTS_DIR
from benchmarks.report import Conditions, add_noisy_flag, write_results
from localsim.controlplane.plane import ControlPlane
from testbed.chaos import daemon_edges, parser_edges, slice_edits, startup_edge
from testbed.chaos.fuzzing import FuzzRun, run_property
from testbed.chaos.load import load_rounds
from testbed.chaos.localrack import ChaosCluster, chaos_cluster
from testbed.chaos.platform import FAULTS, Scene
from testbed.chaos.reaction import reaction_times
from testbed.chaos.realkubelet import TRIGGER, kill_during_burst, steady_pods
from testbed.localcluster import running_cluster
from testbed.realnodes import real_cluster

RESULTS = RESULTS_DIR / "chaos.json"
SECTIONS = ("platform", "load", "reaction", "fuzz", "realkubelet")
CDI_BATCH = 10
"""Foreign file sets placed together around one prepare and unprepare."""
EDIT_BATCH = 20
"""Edit lists written before one wait for the controller's restore."""
START_IN_PROCESS = "damaged checkpoint at start (in process)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.chaos", description=__doc__)
    p.add_argument("--only", default=",".join(SECTIONS), help="sections to run, comma-separated")
    p.add_argument("--nodes", type=int, default=36, help="nodes of the rack (a whole Gen2: 36)")
    p.add_argument("--pods", type=int, default=16, help="chip pods kept running during faults")
    p.add_argument("--claims", type=int, default=1152, help="claims per load round")
    p.add_argument("--rounds", type=int, default=3, help="load rounds")
    p.add_argument("--trials", type=int, default=50, help="fault-to-eviction trials")
    p.add_argument("--cases", type=int, default=10_000, help="fuzz cases per fast edge")
    p.add_argument("--cdi-cases", type=int, default=10_000, help="foreign file sets (CDI edge)")
    p.add_argument("--cdi-batch", type=int, default=CDI_BATCH, help="foreign sets per prepare")
    p.add_argument("--start-cases", type=int, default=20, help="daemon starts on bad checkpoints")
    p.add_argument("--edit-cases", type=int, default=1_000, help="live slice edit lists")
    p.add_argument("--edit-batch", type=int, default=EDIT_BATCH, help="edit lists per restore")
    p.add_argument("--kill-trials", type=int, default=3, help="daemon kills under the kubelet")
    p.add_argument("--kill-pods", type=int, default=10, help="pods of each burst under the kill")
    p.add_argument("--kill-steady", type=int, default=2, help="pods running through all kills")
    add_noisy_flag(p)
    p.add_argument(
        "--rerun-edge",
        default="",
        choices=["", *PURE_EDGES],
        help="run one in-process edge again and replace its row in the fuzz results",
    )
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    unknown = set(args.only.split(",")) - set(SECTIONS)
    if unknown:
        p.error(f"--only: {sorted(unknown)} are not among {', '.join(SECTIONS)}")
    return args


def command(argv: list[str]) -> str:
    """The command that ran, with the flags it was given."""
    return f'make chaos CHAOS_ARGS="{shlex.join(argv)}"' if argv else "make chaos"


# --- sections on a whole local rack --------------------------------------------


def platform_section(cluster: ChaosCluster, args: argparse.Namespace) -> dict[str, Any]:
    scene = Scene(cluster, args.pods)
    runs = [FAULTS[name](scene).to_json() for name in FAULTS]
    scene.clear()
    return {"nodes": args.nodes, "pods": args.pods, "faults": runs}


def load_section(cluster: ChaosCluster, args: argparse.Namespace) -> dict[str, Any]:
    return load_rounds(cluster, args.claims, args.rounds)


def reaction_section(cluster: ChaosCluster, args: argparse.Namespace) -> dict[str, Any]:
    return reaction_times(cluster, args.trials)


CLUSTER_SECTIONS: dict[str, Callable[[ChaosCluster, argparse.Namespace], dict[str, Any]]] = {
    "platform": platform_section,
    "load": load_section,
    "reaction": reaction_section,
}


# --- fuzzing ------------------------------------------------------------------

PURE_EDGES: dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], str]]] = {
    "opaque config (daemon parser)": (parser_edges.configs, parser_edges.check_config),
    "UltraServer spec (controller parser)": (parser_edges.specs, parser_edges.check_spec),
    "health report (controller)": (parser_edges.reports, parser_edges.check_report),
    "checkpoint file (decode)": (parser_edges.checkpoint_files, parser_edges.check_checkpoint),
    "slice edited (controller plan)": (parser_edges.slice_edits, parser_edges.check_slice_edit),
}


def fuzz(
    edge: str,
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], str | Sequence[str]],
    n: int,
) -> FuzzRun:
    """`n` inputs through `check`; for a batched strategy, `n` batches."""
    run = run_property(edge, strategy, check, n, raise_failure=False)
    print(f"  {edge}: {run.cases} cases, {run.crashes} crashes, {run.hangs} hangs", flush=True)
    return run


@contextlib.contextmanager
def control_plane() -> Iterator[ControlPlane]:
    with (
        tempfile.TemporaryDirectory(prefix="chaos-cp-") as workdir,
        ControlPlane.running(Path(workdir)) as plane,
    ):
        yield plane


def fuzz_section(args: argparse.Namespace) -> None:
    """Every edge in turn; the results are stored after each, so a long run
    that is stopped keeps what it finished."""
    done: dict[str, Any] = {"edges": [], "kept_claim_intact": None, "unrestored_edits": []}

    def record(run: FuzzRun) -> None:
        done["edges"].append(run.to_json())
        store("fuzz", done, args)

    for edge, (strategy, check) in PURE_EDGES.items():
        record(fuzz(edge, strategy, check, args.cases))
    with startup_edge.scratch() as root:
        check = partial(startup_edge.check_restore, root)
        record(fuzz(START_IN_PROCESS, parser_edges.checkpoint_files, check, args.cases))
    with control_plane() as plane:
        with daemon_edges.prepared_daemon(plane) as prepared:
            with daemon_edges.workload_client(prepared) as http:
                check = partial(daemon_edges.check_workload_request, prepared, http)
                record(
                    fuzz("workload API (daemon socket)", daemon_edges.requests, check, args.cases)
                )
            cdi_check = partial(daemon_edges.check_cdi_foreign, prepared)
            done["kept_claim_intact"] = prepared.kept_intact()
            done["cdi_batch"] = args.cdi_batch
            record(
                fuzz(
                    "CDI dir with foreign files (daemon)",
                    daemon_edges.foreign_batches(args.cdi_batch),
                    cdi_check,
                    batches(args.cdi_cases, args.cdi_batch),
                )
            )
            done["kept_claim_intact"] = prepared.kept_intact()
        check = partial(daemon_edges.check_checkpoint_start, plane)
        record(
            fuzz(
                "damaged checkpoint at daemon start",
                parser_edges.checkpoint_files,
                check,
                args.start_cases,
            )
        )
        with (
            tempfile.TemporaryDirectory(prefix="chaos-edit-") as logs,
            slice_edits.live_rack(plane, Path(logs) / "controller.log") as rack,
        ):
            edit_check = partial(slice_edits.check_live_round, rack)
            done["edit_batch"] = args.edit_batch
            run = fuzz(
                "slice edited (live controller)",
                slice_edits.edit_rounds(args.edit_batch),
                edit_check,
                batches(args.edit_cases, args.edit_batch),
            )
            restore = sorted(rack.restore_seconds)
            done["slice_restore_p50_s"] = round(restore[len(restore) // 2], 2) if restore else None
            done["slice_restore_max_s"] = round(restore[-1], 2) if restore else None
            done["unrestored_edits"] = [repr(e)[:300] for e in rack.unrestored[:5]]
            record(run)


def batches(cases: int, size: int) -> int:
    return max(1, -(-cases // size))


def rerun_edge(args: argparse.Namespace) -> None:
    """One edge again (after a fix to it or to its check); its row names this command."""
    strategy, check = PURE_EDGES[args.rerun_edge]
    row = fuzz(args.rerun_edge, strategy, check, args.cases).to_json()
    row["command"] = command(args.argv)
    result = json.loads(RESULTS.read_text())["results"]["fuzz"]
    result["edges"] = [row if e["edge"] == row["edge"] else e for e in result["edges"]]
    data: dict[str, Any] = json.loads(RESULTS.read_text())
    data["results"]["fuzz"] = result
    RESULTS.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    render.write_pages()


# --- the node daemon killed under the real kubelet -------------------------------


def realkubelet_section(args: argparse.Namespace) -> None:
    """A real-nodes cluster; each trial's result is stored as soon as it is done."""
    started = time.monotonic()
    with running_cluster("--real-nodes", start_timeout=1800.0) as cluster:
        real = real_cluster(cluster)
        node = sorted(real.nodes)[0]
        steady_pods(real, node, "realkill-steady", args.kill_steady)
        done: dict[str, Any] = {
            "node": node,
            "nodes": len(real.nodes),
            "pods": args.kill_pods,
            "steady": args.kill_steady,
            "trigger": TRIGGER,
            "trials": [],
        }
        for i in range(args.kill_trials):
            trial = kill_during_burst(real, node, f"realkill-{i}", args.kill_pods)
            print(f"  trial {i + 1}: {trial.to_json()}", flush=True)
            done["trials"].append(trial.to_json())
            done["seconds"] = round(time.monotonic() - started, 1)
            store("realkubelet", done, args)


# --- results ------------------------------------------------------------------


def store(section: str, result: dict[str, Any], args: argparse.Namespace) -> None:
    """Merge one section, with the load it ran under, into the results file and
    render the pages from it."""
    write_results("chaos", command(args.argv), result, args.conditions, section=section)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.conditions = Conditions.begin(args.noisy)
    if args.rerun_edge:
        rerun_edge(args)
        return 0
    wanted = args.only.split(",")
    on_cluster = [s for s in wanted if s in CLUSTER_SECTIONS]
    if on_cluster:
        print(f"starting a local rack of {args.nodes} nodes", flush=True)
        with chaos_cluster(args.nodes) as cluster:
            for section in on_cluster:
                started = time.monotonic()
                print(f"{section} ...", flush=True)
                result = CLUSTER_SECTIONS[section](cluster, args)
                result["seconds"] = round(time.monotonic() - started, 1)
                store(section, result, args)
    if "fuzz" in wanted:
        print("fuzz ...", flush=True)
        fuzz_section(args)
    if "realkubelet" in wanted:
        print("realkubelet ...", flush=True)
        realkubelet_section(args)
    print(f"wrote {RESULTS} and the pages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
