"""The example of docs/whatif.md: one generated trace on ten Trn3 Gen2 racks,
replayed by the offline anchor under both placement rules, with gangs and
without, and with gangs and chip and core failures at assumed rates.
Deterministic (a seeded trace and failures, no API, no clock), so the page
can be checked against the code at any time.

Usage: python -m benchmarks.whatif (`make bench-whatif`)
"""

from dataclasses import asdict
from typing import Any, Final

from benchmarks.report import Conditions, write_results
from driver.whatif.faults import FaultRates, RandomFailures
from driver.whatif.figures import summarize
from driver.whatif.fleet import POLICIES
from driver.whatif.offline import replay
from driver.whatif.trace import TraceSpec, generate
from simdevice.topology import rack_spec

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


def main() -> int:
    conditions = Conditions.begin(noisy=True, kubernetes=False)  # no timing, no cluster
    results = {"example": EXAMPLE, "faults": asdict(EXAMPLE_FAULTS), "runs": run_example()}
    write_results("whatif", COMMAND, results, conditions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
