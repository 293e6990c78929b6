"""README.md's generated block: how long a newcomer's first `make demo` took,
from benchmarks/results/first-demo.json (`make bench-first-demo`)."""

from collections.abc import Mapping
from typing import Any

from benchmarks.conditions import is_noisy
from benchmarks.pages.common import loads_text, replace_block


def first_demo(payload: Mapping[str, Any]) -> str:
    """The figure, with the load it ran under from the demo's own samples."""
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
    return (
        f"The first `make demo` on a fresh machine took **{minutes:.0f} minutes** "
        f"({r['make_demo_seconds']:,.0f} s): the one-time set-up (the virtualenv, and "
        f"Kubernetes {r['kubernetes_version']}'s control plane, etcd and helm built from "
        f"their Go modules) and then the demo, whose cluster was up in "
        f"{r['cluster_up_seconds']} s. Later runs reuse the builds. Measured by "
        f"`{payload['command']}` on {m['date']} at commit {r['git_commit'][:10]}: "
        f"a new non-root user whose home is `{r['home']}`, empty caches, {m['cpus']} CPUs; "
        f"{load}."
    )


def render(page: str, payload: Mapping[str, Any]) -> str:
    return replace_block(page, "first-demo", first_demo(payload))
