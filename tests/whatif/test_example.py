"""The examples on docs/whatif.md are what the code replays today."""

import json
from dataclasses import asdict

from benchmarks.paths import RESULTS_DIR, ROOT
from benchmarks.whatif import EXAMPLE, EXAMPLE_FAULTS, SPREAD_CASE, run_example, run_spread_case
from whatif.fleet import SPREAD
from whatif.trace import read_trace


def test_the_committed_example_is_what_the_anchor_replays() -> None:
    committed = json.loads((RESULTS_DIR / "whatif.json").read_text())["results"]
    assert committed["example"] == EXAMPLE, "the example changed: run `make bench-whatif`"
    assert committed["faults"] == asdict(EXAMPLE_FAULTS)
    assert committed["runs"] == json.loads(json.dumps(run_example())), (
        "the anchor's figures changed: run `make bench-whatif` and commit the result"
    )


def test_spread_loses_more_job_seconds_than_the_packing_rules() -> None:
    lost = {run["policy"]: run["spread_lost_job_s"] for run in run_spread_case()}
    packing = [lost[p] for p in SPREAD_CASE["policies"] if p != SPREAD]
    assert all(lost[SPREAD]["total"] > run["total"] for run in packing)
    assert all(lost[SPREAD]["p50"] > run["p50"] for run in packing)
    assert lost[SPREAD]["jobs"] == len(read_trace(ROOT / SPREAD_CASE["trace"]))


def test_the_committed_packed_versus_spread_case_is_what_the_anchor_replays() -> None:
    committed = json.loads((RESULTS_DIR / "whatif.json").read_text())["results"]
    assert committed.get("spread_case") == SPREAD_CASE, "run `make bench-whatif`"
    assert committed["spread_runs"] == json.loads(json.dumps(run_spread_case())), (
        "the packed-versus-spread figures changed: run `make bench-whatif` and commit the result"
    )
