"""README.md's generated blocks, what a newcomer's machine needs: the time,
memory and disk of the first `make demo` (benchmarks/results/first-demo.json,
`make bench-first-demo`) and of the first `make test` (first-test.json, `make
bench-first-test`), and the memory of the largest cluster the project starts
(realrack.json, `make bench-realrack`). A file not there yet says so and
names the command that writes it."""

from collections.abc import Mapping
from typing import Any

from benchmarks.conditions import is_noisy
from benchmarks.pages.common import loads_text, replace_block

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


def first_demo(payload: Mapping[str, Any] | None) -> str:
    """The figure, with the load it ran under from the demo's own samples."""
    if payload is None:
        return not_measured(
            "The time, memory and disk of the first `make demo`", "make bench-first-demo"
        )
    r, m, c = payload["results"], payload["machine"], payload["conditions"]
    if not r["ran_the_demo_job"]:
        return (
            f"The last `{payload['command']}` ({m['date']}) did not run the demo job "
            f"(`make demo` exit code {r['exit_code']}): no first-run time is known."
        )
    during = r["load_during_1min"]
    loads = {**c, "load_during_1min": {"samples": len(during), "max": max(during, default=None)}}
    load = f"1-minute load average {loads_text(loads)}"
    if is_noisy(loads):
        load += (
            f": **a noisy run**, above the {m['cpus']} CPUs, so the time includes waiting for them"
        )
    minutes = r["make_demo_seconds"] / 60
    if "disk_after_mib" in r:
        needs = f" Its {memory(r)}; afterwards the new user's {disk(r['disk_after_mib'])}."
    else:
        needs = (
            f" That run recorded neither memory nor disk; `{payload['command']}` now records both."
        )
    return (
        f"The first `make demo` on a fresh machine took **{minutes:.0f} minutes** "
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
    """The lanes `make test` ran side by side, each with its wall time, where
    the run recorded them."""
    seconds = r.get("lane_seconds") or {}
    if not seconds:
        return ""
    each = ", ".join(f"{lane} {s / 60:.0f} min" for lane, s in seconds.items())
    return f"its lanes, side by side, took {each}; "


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
    in_use = r["available_before_start_mib"] - r["available_idle_mib"]
    return (
        f"The largest cluster the project starts, a whole {r['generation']} rack on "
        f"{r['nodes']} real nodes (`{payload['command']}`, as root; not part of `make test`), "
        f"took {gib(in_use)} of the machine's memory once idle, measured on "
        f"{payload['machine']['date']} "
        "([docs/bench-real-nodes.md](docs/bench-real-nodes.md#realrack))."
    )


def render(page: str, found: Mapping[str, Mapping[str, Any]]) -> str:
    """`page` with its blocks rendered from the results files found by name."""
    page = replace_block(page, "first-demo", first_demo(found.get("first-demo")))
    page = replace_block(page, "first-test", first_test(found.get("first-test")))
    return replace_block(page, "realrack-memory", realrack(found.get("realrack")))
