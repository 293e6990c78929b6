"""The committed benchmark pages are what the committed results render: no
figure on them is typed by hand or left over from an older run."""

import copy
import re
from pathlib import Path
from typing import Any, Final

import pytest

from benchmarks import render
from benchmarks.pages import benchmarks
from benchmarks.pages.common import NotRecordedError
from benchmarks.paths import DOCS
from tests.benchmarks.recorded import RUN

FOUND = render.results()
RENDERED = render.pages(FOUND)
PAGES = (
    "benchmarks.md",
    "bench-simulator.md",
    "bench-node-daemon.md",
    "bench-controller.md",
    "bench-real-nodes.md",
    "bench-scheduler.md",
    "bench-first-runs.md",
    "reliability.md",
    "scale.md",
    "simulator.md",
    "device-model.md",
    "bench-whatif.md",
    "queues.md",
    "aws-neuron.md",
)
FIX = "run `make pages` (python -m benchmarks.render) and commit the result"


@pytest.mark.parametrize("name", PAGES)
def test_committed_page_is_rendered_from_the_results(name: str) -> None:
    page = DOCS / name
    assert page in RENDERED, f"docs/{name}: no renderer produced it"
    assert page.read_text() == RENDERED[page], (
        f"docs/{name} differs from what benchmarks/results/*.json render: {FIX}"
    )


def test_committed_plots_are_rendered_from_the_results(tmp_path: Path) -> None:
    drawn = render.write_plots(FOUND, tmp_path)
    committed = sorted(p.name for p in (DOCS / "images").glob(f"{render.PLOT_PREFIX}*.png"))
    assert sorted(p.name for p in drawn) == committed, f"docs/images plots: {FIX}"
    for plot in drawn:
        assert plot.read_bytes() == (DOCS / "images" / plot.name).read_bytes(), (
            f"docs/images/{plot.name} differs from what the results draw: {FIX}"
        )


def test_a_changed_result_changes_its_page() -> None:
    changed = copy.deepcopy(FOUND)
    for run in changed["controller"]["results"]["publish"][0]["runs"]:
        run["seconds"] += 1.0
    page = DOCS / "bench-controller.md"
    assert render.pages(changed)[page] != RENDERED[page]
    assert render.pages(changed)[DOCS / "scale.md"] != RENDERED[DOCS / "scale.md"]


STORAGE: Final[dict[str, Any]] = {
    "command": "make bench-storage",
    "machine": {"cpus": 2, "date": "2026-12-08", "machine": "x86_64", "python": "3.11.7"},
    "conditions": RUN,
    "results": {
        "racks": 10,
        "runs": {
            "rack pools": [
                {
                    "slices_per_rack": 42,
                    "slice_json_bytes_per_rack": 1.8 * 2**20,
                    "etcd_bytes_per_rack": 1.3 * 2**20,
                }
            ]
        },
    },
}
"""A storage run as `make bench-storage` writes it."""


def test_a_changed_etcd_measurement_changes_the_scale_page() -> None:
    measured = render.pages({**FOUND, "storage": STORAGE})[DOCS / "scale.md"]
    changed = copy.deepcopy(STORAGE)
    changed["results"]["runs"]["rack pools"][0]["etcd_bytes_per_rack"] *= 2
    assert render.pages({**FOUND, "storage": changed})[DOCS / "scale.md"] != measured


def test_results_without_their_conditions_are_refused_naming_the_file() -> None:
    unrecorded = {k: v for k, v in STORAGE.items() if k != "conditions"}
    with pytest.raises(NotRecordedError, match=r"benchmarks/results/storage\.json: .*git_commit"):
        render.pages({**FOUND, "storage": unrecorded})
    older = {**STORAGE, "conditions": {k: v for k, v in RUN.items() if k != "git_commit"}}
    with pytest.raises(NotRecordedError, match="recorded no git_commit"):
        render.pages({**FOUND, "storage": older})


def test_a_topic_without_its_results_names_the_target_that_measures_them() -> None:
    makefile = (DOCS.parent / "Makefile").read_text()
    for topic in benchmarks.TOPICS.values():
        for name in topic.sections:
            assert re.search(rf"^bench-{name}:", makefile, re.MULTILINE), f"make bench-{name}"
    page = render.pages({k: v for k, v in FOUND.items() if k != "sim"})[DOCS / "bench-simulator.md"]
    assert "## sim\n\nNot measured: `make bench-sim` measures it.\n" in page


def test_every_results_file_reaches_a_page() -> None:
    """A results file no page renders would be figures nobody sees."""
    text = "\n".join(RENDERED.values())
    for name, payload in FOUND.items():
        command = payload.get("command") or next(iter(payload.get("commands", {}).values()), "")
        shown = command in text or name == "sim-validation"  # validation carries no command
        assert shown, f"benchmarks/results/{name}.json: no page shows its command"


def test_readme_first_run_figure_is_rendered_from_its_results() -> None:
    readme = DOCS.parent / "README.md"
    assert readme in RENDERED, "README.md: no renderer produced it"
    assert readme.read_text() == RENDERED[readme], f"README.md's generated blocks: {FIX}"
    changed = copy.deepcopy(FOUND)
    changed["first-demo"]["results"]["make_demo_seconds"] += 120.0
    assert render.pages(changed)[readme] != RENDERED[readme]
    assert render.pages(changed)[FIRST_RUNS] != RENDERED[FIRST_RUNS]


DISK = {
    "checkout": 900,
    "trainium_dra_cache": 6144,
    "uv_cache": 300,
    "go_module_cache": 2048,
    "go_build_cache": 4096,
}
MEMORY = {
    "memory_total_mib": 24576,
    "memory_in_use_before_mib": 2048,
    "memory_in_use_peak_mib": 9216,
}


def first_test_payload(**results: object) -> dict[str, Any]:
    """A first-test.json holding one run, in the section its caches name."""
    run = {
        "date": "2026-12-06",
        "git_commit": "0123456789abcdef",
        "previous_kubernetes_version": "v1.36.3",
        "releases_built_before": [],
        "caches": "cold",
        "exit_code": 0,
        "passed": True,
        "make_test_seconds": 2700.0,
        "pytest_summaries": ["1200 passed, 4 skipped in 1800.00s (0:30:00)"],
        **MEMORY,
        "disk_before_mib": dict.fromkeys(DISK, 0),
        "disk_after_mib": DISK,
        **results,
    }
    section = str(run["caches"])
    return {
        "benchmark": "first-test",
        "commands": {section: "make bench-first-test"},
        "machine": {"cpus": 2, "date": "2026-12-07", "machine": "x86_64", "python": "3.11.7"},
        "conditions": {
            section: {
                "cpus": 2,
                "kubernetes_version": "v1.37.2",
                "load_1min_before": 0.3,
                "load_during_1min": {"samples": 270, "max": 5.1, "mean": 3.2},
                "load_1min_after": 1.2,
                "noisy": False,
            }
        },
        "results": {section: run},
    }


FIRST_RUNS = DOCS / "bench-first-runs.md"


def readme_block(found: dict[str, dict[str, Any]], name: str) -> str:
    text = render.pages(found)[DOCS.parent / "README.md"]
    return text.split(f"<!-- {name}:start -->")[1].split(f"<!-- {name}:end -->")[0]


def first_runs_section(found: dict[str, dict[str, Any]], command: str) -> str:
    """The section of docs/bench-first-runs.md that tells `make <command>`'s run."""
    text = render.pages(found)[FIRST_RUNS]
    return text.split(f"## make {command}\n")[1].split("\n## ")[0]


def box_rows(found: dict[str, dict[str, Any]]) -> list[str]:
    """README's box of first runs, row by row, its header left out."""
    return [line for line in readme_block(found, "first-runs").splitlines() if line[:3] == "| `"]


def test_readme_says_what_is_not_measured_yet_and_how_to_measure_it() -> None:
    found = {k: v for k, v in FOUND.items() if k != "first-test"}
    block = first_runs_section(found, "test")
    assert "not measured yet" in block and "`make bench-first-test`" in block
    (row,) = [r for r in box_rows(found) if r.startswith("| `make test`")]
    assert "not measured yet (`make bench-first-test`)" in row


def test_readme_renders_the_first_make_test_from_its_results() -> None:
    found = {**FOUND, "first-test": first_test_payload()}
    block = first_runs_section(found, "test")
    assert "**45 minutes** (2,700 s) and passed, with cold caches" in block
    assert "Kubernetes v1.37.2, and what can depend on the release on v1.36.3 too" in block
    assert "`1200 passed, 4 skipped in 1800.00s (0:30:00)`" in block
    assert "peaked at 9.0 GiB (2.0 GiB before it, of 24.0 GiB)" in block
    assert "took 13.2 GiB of disk (the checkout with its `.venv` 0.9 GiB" in block
    assert "`make bench-first-test`" in block
    assert "lanes" not in block
    laned = first_test_payload(
        set_up_seconds={"lint": 130, "binaries": 960},
        lane_seconds={"stand-in": 1140, "real-nodes": 1320, "kind": 660},
    )
    block = first_runs_section({**FOUND, "first-test": laned}, "test")
    set_up = "its set-up steps, side by side, took lint 2 min, binaries 16 min; "
    lanes = "its lanes, side by side, took stand-in 19 min, real-nodes 22 min, kind 11 min;"
    assert set_up + lanes in block
    failed = first_test_payload(
        exit_code=2, passed=False, caches="warm", releases_built_before=["v1.36.3", "v1.37.2"]
    )
    block = first_runs_section({**FOUND, "first-test": failed}, "test")
    assert "and **failed** (exit code 2), with warm caches" in block
    assert "already held the builds of v1.36.3, v1.37.2" in block


def test_readme_renders_the_cold_run_then_the_warm_one() -> None:
    cold = first_test_payload()
    warm = first_test_payload(caches="warm", make_test_seconds=1149.4, date="2026-12-08")
    both = copy.deepcopy(cold)
    for key in ("results", "conditions", "commands"):
        both[key].update(warm[key])
    block = first_runs_section({**FOUND, "first-test": both}, "test")
    cold_at, warm_at = block.index("with cold caches"), block.index("with warm caches")
    assert cold_at < warm_at
    assert "**45 minutes** (2,700 s)" in block[:warm_at]
    assert "**19 minutes** (1,149 s)" in block[cold_at:]
    assert "on 2026-12-06 at commit" in block[:warm_at]
    assert "on 2026-12-08 at commit" in block[cold_at:]
    cold_row, warm_row = box_rows({**FOUND, "first-test": both})[1:]
    assert cold_row == (
        "| `make test`, as root, cold caches | 45 min (2,700 s) | 9.0 GiB | 13.2 GiB "
        "| 2026-12-06, commit 0123456789, **noisy** |"
    )
    assert "| 19 min (1,149 s) |" in warm_row and "| 2026-12-08, commit 0123456789" in warm_row


def test_the_readme_box_marks_a_noisy_run_beside_its_figures() -> None:
    quiet = first_test_payload()
    quiet["conditions"]["cold"]["load_during_1min"]["max"] = 1.5
    (row,) = box_rows({**FOUND, "first-test": quiet})[1:]
    assert row.endswith("| 2026-12-06, commit 0123456789 |")
    quiet["conditions"]["cold"]["load_1min_after"] = 7.5
    (row,) = box_rows({**FOUND, "first-test": quiet})[1:]
    assert row.endswith("| 2026-12-06, commit 0123456789, **noisy** |")


def test_readme_renders_the_first_demos_memory_and_disk_once_recorded() -> None:
    older = copy.deepcopy(FOUND)
    for key in (*MEMORY, "disk_after_mib"):
        del older["first-demo"]["results"][key]
    assert "recorded neither memory nor disk" in first_runs_section(older, "demo")
    changed = copy.deepcopy(older)
    changed["first-demo"]["results"].update(MEMORY, disk_after_mib=DISK)
    block = first_runs_section(changed, "demo")
    assert "memory in use on the machine peaked at 9.0 GiB" in block
    assert "the new user's 13.2 GiB of disk" in block
    before, after = box_rows(older)[0], box_rows(changed)[0]
    assert "| not recorded | not recorded |" in before
    assert "| 9.0 GiB | 13.2 GiB |" in after


def test_a_changed_empty_fleet_run_changes_the_device_model_page() -> None:
    page = DOCS / "device-model.md"
    changed = copy.deepcopy(FOUND)
    for run in changed["scheduler"]["results"]["occupancy"]["10"]["0"]["node pools"]:
        run["profile"]["parts_cum_percent"]["node selectors"] += 10.0
    assert render.pages(changed)[page] != RENDERED[page]
