"""What a newcomer's machine needs: the time, memory and disk of the first
`make demo` (benchmarks/results/first-demo.json, `make bench-first-demo`) and
of the first `make test` (first-test.json, `make bench-first-test`), and the
memory of the largest cluster the project starts (realrack.json, `make
bench-realrack`). README.md's box holds one row per run with its date, commit
and noisy mark; docs/bench-first-runs.md tells each run in full. A file not
there yet says so and names the command that writes it."""

from collections.abc import Mapping
from typing import Any, Final

from benchmarks.conditions import is_noisy
from benchmarks.pages.common import loads_text, recorded, replace_block, table

PAGE: Final = "bench-first-runs.md"
"""The docs page that tells each first run in full."""

DISK_PARTS = {
    "checkout": "the checkout with its `.venv`",
    "trainium_dra_cache": "`~/.cache/trainium-dra`",
    "uv_cache": "uv's cache",
    "go_module_cache": "Go's module cache",
    "go_build_cache": "Go's build cache",
}


def not_measured(what: str, command: str) -> str:
    return f"{what}: not measured yet; `{command}` (as root) measures it."


def gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def memory(r: Mapping[str, Any]) -> str:
    return (
        f"memory in use on the machine peaked at {gib(r['memory_in_use_peak_mib'])} "
        f"({gib(r['memory_in_use_before_mib'])} before it, of {gib(r['memory_total_mib'])})"
    )


def disk(sizes: Mapping[str, int]) -> str:
    parts = ", ".join(f"{DISK_PARTS[name]} {gib(mib)}" for name, mib in sizes.items())
    return f"{gib(sum(sizes.values()))} of disk ({parts})"


def demo_loads(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The demo's conditions with the load it sampled itself during the run."""
    during = payload["results"]["load_during_1min"]
    return {
        **payload["conditions"],
        "load_during_1min": {"samples": len(during), "max": max(during, default=None)},
    }


def first_demo(payload: Mapping[str, Any] | None) -> str:
    """The figure, with the load it ran under from the demo's own samples."""
    if payload is None:
        return not_measured(
            "The time, memory and disk of the first `make demo`", "make bench-first-demo"
        )
    r, m = payload["results"], payload["machine"]
    if not r["ran_the_demo_job"]:
        return (
            f"The last `{payload['command']}` ({m['date']}) did not run the demo job "
            f"(`make demo` exit code {r['exit_code']}): no first-run time is known."
        )
    loads = demo_loads(payload)
    load = f"1-minute load average {loads_text(loads)}"
    if is_noisy(loads):
        load += (
            f": **a noisy run**, above the {m['cpus']} CPUs, so the time includes waiting for them"
        )
    spent = r["make_demo_seconds"] / 60
    if "disk_after_mib" in r:
        needs = f" Its {memory(r)}; afterwards the new user's {disk(r['disk_after_mib'])}."
    else:
        needs = (
            f" That run recorded neither memory nor disk; `{payload['command']}` now records both."
        )
    return (
        f"The first `make demo` on a fresh machine took **{spent:.0f} minutes** "
        f"({r['make_demo_seconds']:,.0f} s): the one-time set-up (the virtualenv, and "
        f"Kubernetes {r['kubernetes_version']}'s control plane, etcd and helm built from "
        f"their Go modules) and then the demo, whose cluster was up in "
        f"{r['cluster_up_seconds']} s. Later runs reuse the builds.{needs} Measured by "
        f"`{payload['command']}` on {m['date']} at commit {r['git_commit'][:10]}: "
        f"a new non-root user whose home is `{r['home']}`, empty caches, {m['cpus']} CPUs; "
        f"{load}."
    )


def caches(r: Mapping[str, Any], release: str) -> str:
    built = ", ".join(r["releases_built_before"])
    if r["caches"] == "warm":
        return (
            f"warm caches (`~/.cache/trainium-dra` already held the builds of {built}; "
            "a run on empty caches builds them too, and takes longer)"
        )
    held = f" (it held only {built})" if built else ""
    return f"cold caches (`~/.cache/trainium-dra` held no build of {release}{held})"


def lanes(r: Mapping[str, Any]) -> str:
    """The set-up steps and the lanes `make test` ran side by side, each with
    its wall time, where the run recorded them."""
    parts = []
    for key, what in (("set_up_seconds", "set-up steps"), ("lane_seconds", "lanes")):
        seconds = r.get(key) or {}
        if seconds:
            each = ", ".join(f"{name} {s / 60:.0f} min" for name, s in seconds.items())
            parts.append(f"its {what}, side by side, took {each}; ")
    return "".join(parts)


FIRST_TEST_RUNS = ("cold", "warm")
"""The sections of first-test.json, in the README's order."""


def first_test(payload: Mapping[str, Any] | None) -> str:
    recorded = payload["results"] if payload else {}
    runs = [run for run in FIRST_TEST_RUNS if run in recorded]
    if payload is None or not runs:
        return not_measured(
            "The time, memory and disk of the first `make test`", "make bench-first-test"
        )
    return "\n\n".join(
        first_test_run(
            payload["results"][run],
            payload["conditions"][run],
            payload["commands"][run],
            payload["machine"]["cpus"],
        )
        for run in runs
    )


def first_test_run(r: Mapping[str, Any], c: Mapping[str, Any], command: str, cpus: int) -> str:
    release = c["kubernetes_version"]
    verdict = "passed" if r["passed"] else f"**failed** (exit code {r['exit_code']})"
    summaries = "; ".join(f"`{s}`" for s in r["pytest_summaries"]) or "none"
    load = f"1-minute load average {loads_text(c)}"
    noisy = (
        f" **A noisy run**: the load exceeded the {cpus} CPUs at some reading "
        "(the run's own builds and clusters count too)."
        if is_noisy(c)
        else ""
    )
    return (
        f"The first `make test` in a fresh clone took **{r['make_test_seconds'] / 60:.0f} "
        f"minutes** ({r['make_test_seconds']:,.0f} s) and {verdict}, with {caches(r, release)}. "
        f"It ran on Kubernetes {release}, and what can depend on the release on "
        f"{r['previous_kubernetes_version']} too (`make test-previous`); {lanes(r)}"
        f"its pytest runs ended: {summaries}. Its {memory(r)}; "
        f"afterwards the checkout and the caches took {disk(r['disk_after_mib'])}, "
        f"{gib(sum(r['disk_before_mib'].values()))} before it. Measured by "
        f"`{command}` on {r['date']} at commit {r['git_commit'][:10]} as root, "
        f"{cpus} CPUs; {load}.{noisy}"
    )


def realrack(payload: Mapping[str, Any] | None) -> str:
    if payload is None:
        return not_measured("The memory of a whole rack on real nodes", "make bench-realrack")
    r = payload["results"]
    c = recorded(payload.get("conditions"), "benchmarks/results/realrack.json")
    in_use = r["available_before_start_mib"] - r["available_idle_mib"]
    noisy = ", **noisy**" if is_noisy(c) else ""
    return (
        f"The largest cluster the project starts, a whole {r['generation']} rack on "
        f"{r['nodes']} real nodes (`{payload['command']}`, as root; not part of `make test`), "
        f"took {gib(in_use)} of the machine's memory once idle (measured "
        f"{payload['machine']['date']}, commit {c['git_commit'][:10]}{noisy}; "
        "[docs/bench-real-nodes.md](docs/bench-real-nodes.md#realrack))."
    )


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min ({seconds:,.0f} s)"


def measured(date: str, commit: str, noisy: bool) -> str:
    """When and from which commit a row's figures come, marked where noisy."""
    mark = ", **noisy**" if noisy else ""
    return f"{date}, commit {commit[:10]}{mark}"


NOT_RECORDED_CELL: Final = "not recorded"


def demo_row(payload: Mapping[str, Any] | None) -> list[object]:
    if payload is None:
        return ["`make demo`", "not measured yet (`make bench-first-demo`)", "", "", ""]
    r = payload["results"]
    when = measured(payload["machine"]["date"], r["git_commit"], is_noisy(demo_loads(payload)))
    if not r["ran_the_demo_job"]:
        return ["`make demo`", f"did not finish (exit code {r['exit_code']})", "", "", when]
    peak = gib(r["memory_in_use_peak_mib"]) if "memory_in_use_peak_mib" in r else None
    after = gib(sum(r["disk_after_mib"].values())) if "disk_after_mib" in r else None
    return [
        "`make demo`, as any user",
        minutes(r["make_demo_seconds"]),
        peak or NOT_RECORDED_CELL,
        after or NOT_RECORDED_CELL,
        when,
    ]


def make_test_rows(payload: Mapping[str, Any] | None) -> list[list[object]]:
    recorded = payload["results"] if payload else {}
    runs = [run for run in FIRST_TEST_RUNS if run in recorded]
    if payload is None or not runs:
        return [["`make test`", "not measured yet (`make bench-first-test`)", "", "", ""]]
    rows: list[list[object]] = []
    for run in runs:
        r, c = payload["results"][run], payload["conditions"][run]
        verdict = "" if r["passed"] else f", **failed** (exit code {r['exit_code']})"
        rows.append(
            [
                f"`make test`, as root, {run} caches",
                minutes(r["make_test_seconds"]) + verdict,
                gib(r["memory_in_use_peak_mib"]),
                gib(sum(r["disk_after_mib"].values())),
                measured(r["date"], r["git_commit"], is_noisy(c)),
            ]
        )
    return rows


BOX_HEADER: Final = (
    "first run",
    "took",
    "peak memory in use",
    "disk afterwards (checkout and caches)",
    "measured (date, commit)",
)


def box(found: Mapping[str, Mapping[str, Any]]) -> str:
    """README's table of the first runs, one row per run with its date, commit
    and noisy mark, and where each run is told in full."""
    rows = [demo_row(found.get("first-demo")), *make_test_rows(found.get("first-test"))]
    return (
        f"{table(BOX_HEADER, rows)}\n\n"
        "A noisy run's load exceeded the machine's CPUs, so its time includes waiting "
        f"for them. Each run in full, with the load it ran under and the disk by cache: "
        f"[docs/{PAGE}](docs/{PAGE})."
    )


def first_runs_page(found: Mapping[str, Mapping[str, Any]]) -> str:
    """docs/bench-first-runs.md: the first `make demo`, then the first `make test`."""
    return (
        "# Benchmarks: the first runs\n\n"
        "What the first `make demo` and the first `make test` took on a fresh machine: "
        "their time, the memory and disk they needed, and the conditions they ran under.\n\n"
        "Every figure on this page is rendered by `make pages` from "
        "`benchmarks/results/first-demo.json` and `benchmarks/results/first-test.json`; "
        "how: [benchmarks.md](benchmarks.md#how-pages-are-made).\n\n"
        f"## make demo\n\n{first_demo(found.get('first-demo'))}\n\n"
        f"## make test\n\n{first_test(found.get('first-test'))}\n"
    )


def render(page: str, found: Mapping[str, Mapping[str, Any]]) -> str:
    """README.md with its blocks rendered from the results files found by name."""
    page = replace_block(page, "first-runs", box(found))
    return replace_block(page, "realrack-memory", realrack(found.get("realrack")))
