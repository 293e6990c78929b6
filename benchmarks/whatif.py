"""The examples of docs/whatif.md: one generated trace on ten Trn3 Gen2 racks,
replayed by the offline anchor under both placement rules, with gangs and
without, and with gangs and chip and core failures at assumed rates; and
packed versus spread, a checked-in trace of training jobs replayed under a
packing and a spreading rule, each job timed on the chips it was given.
Deterministic (seeded traces and failures, no API, no clock), so the page
can be checked against the code at any time.

Usage: python -m benchmarks.whatif [--out FILE] (`make bench-whatif`)
"""

import argparse
from dataclasses import asdict
from typing import Any, Final

from benchmarks.paths import ROOT
from benchmarks.report import Conditions, add_out_flag, write_results, write_trial
from simdevice.topology import rack_spec
from whatif.faults import FaultRates, RandomFailures
from whatif.figures import summarize
from whatif.fleet import POLICIES, SPREAD
from whatif.offline import replay
from whatif.trace import TraceSpec, generate, read_trace

COMMAND = "make bench-whatif"
EXAMPLE: Final[dict[str, Any]] = {
    "generation": "trn3-gen2",
    "racks": 10,
    "jobs": 2000,
    "seed": 1,
    "offered_load": 2.0,
    "mix": {
        "cores-1": 0.3,
        "cores-2": 0.1,
        "cores-4": 0.1,
        "chips-1": 0.3,
        "chips-4": 0.1,
        "serverx4": 0.07,
        "rack": 0.03,
    },
}
"""Every size the driver publishes, gangs of four servers and whole racks."""
EXAMPLE_FAULTS: Final = FaultRates(chip_mtbf_hours=20_000.0, core_mtbf_hours=100_000.0)
"""Assumed rates for the example's runs with failures, not measured ones: no
failure rate of Trainium chips is published."""


def run_example(example: dict[str, Any] = EXAMPLE) -> list[dict[str, Any]]:
    rack = rack_spec(example["generation"])
    spec = TraceSpec(example["jobs"], example["offered_load"], mix=example["mix"])
    jobs = generate(spec, rack, example["racks"], example["seed"])
    racks = example["racks"]
    plain = [
        summarize(replay(jobs, rack, racks, policy=policy, gangs=gangs))
        for gangs in (True, False)
        for policy in POLICIES
    ]
    fifo = [
        summarize(replay(jobs, rack, racks, policy=policy, queueing="fifo")) for policy in POLICIES
    ]
    failing = [
        summarize(
            replay(
                jobs,
                rack,
                racks,
                policy=policy,
                failures=RandomFailures(EXAMPLE_FAULTS, rack, racks, example["seed"]),
            )
        )
        for policy in POLICIES
    ]
    return plain + fifo + failing


SPREAD_CASE: Final[dict[str, Any]] = {
    "trace": "benchmarks/traces/packed-versus-spread.csv",
    "generation": "trn3-gen2",
    "racks": 2,
    "policies": ["first-fit", "best-fit", SPREAD],
}
"""Packed versus spread: 36 data-parallel training jobs of 2, 4 and 8 chips
(one chip a pod), arriving every 5 minutes on two racks, each running a
train-step (hidden 1024, seq 512) for its iterations. First fit and best fit
pack a job's pods; spread puts each on the emptiest server and rack."""


def run_spread_case(case: dict[str, Any] = SPREAD_CASE) -> list[dict[str, Any]]:
    rack = rack_spec(case["generation"])
    jobs = read_trace(ROOT / case["trace"])
    return [
        summarize(replay(jobs, rack, case["racks"], policy=policy)) for policy in case["policies"]
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.whatif")
    add_out_flag(parser)
    args = parser.parse_args(argv)
    conditions = Conditions.begin(noisy=True, kubernetes=False)  # no timing, no cluster
    results = {
        "example": EXAMPLE,
        "faults": asdict(EXAMPLE_FAULTS),
        "runs": run_example(),
        "spread_case": SPREAD_CASE,
        "spread_runs": run_spread_case(),
    }
    if args.out is not None:
        print(write_trial(args.out, "whatif", COMMAND, results, conditions))
        return 0
    write_results("whatif", COMMAND, results, conditions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
