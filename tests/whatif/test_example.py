"""The example on docs/whatif.md is what the code replays today."""

import json
from dataclasses import asdict

from benchmarks.paths import RESULTS_DIR
from benchmarks.whatif import EXAMPLE, EXAMPLE_FAULTS, run_example


def test_the_committed_example_is_what_the_anchor_replays() -> None:
    committed = json.loads((RESULTS_DIR / "whatif.json").read_text())["results"]
    assert committed["example"] == EXAMPLE, "the example changed: run `make bench-whatif`"
    assert committed["faults"] == asdict(EXAMPLE_FAULTS)
    assert committed["runs"] == json.loads(json.dumps(run_example())), (
        "the anchor's figures changed: run `make bench-whatif` and commit the result"
    )
