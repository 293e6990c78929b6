"""The example of docs/whatif.md: one generated trace on ten Trn3 Gen2 racks,
replayed by the offline anchor under both placement rules, with gangs and
without. Deterministic (a seeded trace, no API, no clock), so the page can be
checked against the code at any time.

Usage: python -m benchmarks.whatif (`make bench-whatif`)
"""

from typing import Any, Final

from benchmarks.report import Conditions, write_results
from driver.whatif.fleet import POLICIES
from driver.whatif.metrics import summarize
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


def run_example(example: dict[str, Any] = EXAMPLE) -> list[dict[str, Any]]:
    rack = rack_spec(example["generation"])
    spec = TraceSpec(example["jobs"], example["offered_load"], mix=example["mix"])
    jobs = generate(spec, rack, example["racks"], example["seed"])
    return [
        summarize(replay(jobs, rack, example["racks"], policy=policy, gangs=gangs))
        for gangs in (True, False)
        for policy in POLICIES
    ]


def main() -> int:
    conditions = Conditions.begin(noisy=True)  # no timing: the load cannot change a figure
    write_results("whatif", COMMAND, {"example": EXAMPLE, "runs": run_example()}, conditions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
