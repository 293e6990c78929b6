"""The simulated UltraServer operator's failure strategies, timed on the
stand-in (two Trn3 Gen1 racks of the AWS profile, the operator beside the
controller): per strategy, a workload of one pair with its two pods Running,
then chip 0 of its first node failed through the simulator's fault plane.
Recorded: seconds from the fault to the NeuronUltraServer `Degraded`, to the
workload's reason naming what its strategy did, and to both pods Running
again; the pods replaced and the claims made anew. The strategies run
interleaved, three times each, on one cluster.

Usage: python -m benchmarks.usoperator (`make bench-usoperator`)
"""

import argparse
from collections.abc import Callable
from functools import partial
from typing import Any, Final

from benchmarks.report import Conditions, add_noisy_flag, interleaved, make_command, write_results
from testbed.examples.target import Target, rack_of
from testbed.examples.usoperator import OPERATOR_RACKS, TIMED_POLL, FailureRun, fail_a_node
from testbed.localcluster import running_cluster

COMMAND = "make bench-usoperator"
STRATEGIES: Final = {
    "NoOp": ("workload", "training"),
    "RestartAll": ("restart-all", "restart-all"),
    "MigrateAffected": ("migrate-affected", "migrate-affected"),
}
"""Strategy -> (example file, workload name) in deploy/examples/aws-ultraserver/."""


def record(run: FailureRun) -> dict[str, Any]:
    replaced = set(run.pods_before) - set(run.pods_after) if run.pods_after else set()
    return {
        "seconds": run.seconds,
        "nodes_before": run.before["nodes"],
        "nodes_after": run.after["nodes"],
        "reason": run.after["reason"],
        "pods": len(run.pods_before),
        "pods_replaced": len(replaced) if run.pods_after else None,
        "claims_made": run.claims_made if run.pods_after else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.usoperator")
    add_noisy_flag(parser)
    args = parser.parse_args(argv)
    conditions = Conditions.begin(args.noisy)
    with running_cluster(*OPERATOR_RACKS) as cluster:
        target = Target(
            cluster,
            rack_of(cluster),
            lambda node: cluster.sim_control(node.rsplit("-node-", 1)[0]),
            False,
        )
        runs: dict[str, Callable[[], dict[str, Any]]] = {
            strategy: partial(lambda f, n: record(fail_a_node(target, f, n)), *example)
            for strategy, example in STRATEGIES.items()
        }
        measured = interleaved(runs)
    results = {"cluster": list(OPERATOR_RACKS), "poll_seconds": TIMED_POLL, "strategies": measured}
    write_results("usoperator", make_command(COMMAND, argv), results, conditions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
