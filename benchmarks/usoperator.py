"""The simulated UltraServer operator's failure strategies, timed on the
stand-in (two Trn3 Gen1 racks of the AWS profile, the operator beside the
controller): per fault kind and strategy, a workload of one pair with its two
pods Running, then the fault put on its first node (testbed/examples/
usoperator.py's `FAULTS`: a failed chip, a chip's links down, its node daemon
stopped, its Node NotReady). Recorded: seconds from the fault to the
NeuronUltraServer `Degraded`, to the workload's reason naming what its
strategy did, and to both pods Running again; the pods replaced and the
claims made anew. The cases run interleaved, three times each, on one cluster.

Usage: python -m benchmarks.usoperator [--noisy --out FILE] (`make bench-usoperator`)
"""

import argparse
from collections.abc import Callable
from functools import partial
from typing import Any, Final

from benchmarks.report import (
    REPEATS,
    Conditions,
    add_noisy_flag,
    add_out_flag,
    interleaved,
    make_command,
    write_results,
    write_trial,
)
from testbed.examples.target import Target, rack_of
from testbed.examples.usoperator import (
    FAULTS,
    OPERATOR_CLUSTER,
    TIMED_POLL,
    FailureRun,
    fail_a_node,
    standin_daemon_pids,
)
from testbed.localcluster import running_cluster

COMMAND = "make bench-usoperator"
STRATEGIES: Final = {
    "NoOp": ("workload", "training"),
    "RestartAll": ("restart-all", "restart-all"),
    "MigrateAffected": ("migrate-affected", "migrate-affected"),
}
"""Strategy -> (example file, workload name) in deploy/examples/aws-ultraserver/."""
SEPARATOR = " / "


def record(run: FailureRun) -> dict[str, Any]:
    moved = run.seconds["running"] is not None
    replaced = set(run.pods_before) - set(run.pods_after)
    return {
        "seconds": run.seconds,
        "nodes_before": run.before["nodes"],
        "nodes_after": run.after["nodes"],
        "reason": run.after["reason"],
        "pods": len(run.pods_before),
        "pods_replaced": len(replaced) if moved else None,
        "pods_still_running": len(set(run.pods_before) & set(run.pods_after)),
        "claims_made": run.claims_made if moved else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.usoperator")
    add_out_flag(parser)
    parser.add_argument(
        "--repeats", type=int, default=REPEATS, help=f"runs of each case (default {REPEATS})"
    )
    add_noisy_flag(parser)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats: must be 1 or more")
    conditions = Conditions.begin(args.noisy)
    with running_cluster(*OPERATOR_CLUSTER) as cluster:
        target = Target(
            cluster,
            rack_of(cluster),
            lambda node: cluster.sim_control(node.rsplit("-node-", 1)[0]),
            False,
            standin_daemon_pids(cluster),
        )
        runs: dict[str, Callable[[], dict[str, Any]]] = {
            f"{kind}{SEPARATOR}{strategy}": partial(
                lambda f, n, fault: record(fail_a_node(target, f, n, fault)), *example, fault
            )
            for kind, fault in FAULTS.items()
            for strategy, example in STRATEGIES.items()
        }
        measured = interleaved(runs, args.repeats)
    faults: dict[str, Any] = {
        kind: {"what": fault.what, "strategies": {}} for kind, fault in FAULTS.items()
    }
    for case, found in measured.items():
        kind, strategy = case.split(SEPARATOR)
        faults[kind]["strategies"][strategy] = found
    results = {"cluster": list(OPERATOR_CLUSTER), "poll_seconds": TIMED_POLL, "faults": faults}
    if args.out:
        write_trial(args.out, "usoperator", make_command(COMMAND, argv), results, conditions)
        return 0
    write_results("usoperator", make_command(COMMAND, argv), results, conditions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
