"""The report's plots: allocation and fragmentation over time, and the
distributions of queueing delay and completion time, one line per replay."""

from collections.abc import Sequence
from pathlib import Path

from driver.whatif.replay import Replay

PLOTS = ("allocation", "fragmentation", "queueing", "completion")


def label(run: Replay) -> str:
    return f"{run.policy}, gangs {'on' if run.gangs else 'off'}"


def write_plots(out: Path, runs: Sequence[Replay]) -> list[Path]:
    """PNG files in `out`, named after PLOTS; none without matplotlib (the
    `whatif` extra), which the caller reports."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name in PLOTS:
        fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
        for run in runs:
            cores = run.racks * run.rack.chips * run.rack.chip.cores
            if name in ("allocation", "fragmentation"):
                times = [s.time / 3600 for s in run.samples]
                if name == "allocation":
                    values = [s.allocated_cores / cores for s in run.samples]
                else:
                    values = [
                        (s.unusable_free_cores or 0)
                        / max(1, cores - s.allocated_cores - s.failed_cores)
                        for s in run.samples
                    ]
                ax.step(times, values, where="post", label=label(run), linewidth=0.8)
                ax.set_xlabel("simulated hours")
            else:
                delays = sorted(
                    (r.start - r.job.arrival if name == "queueing" else r.end - r.job.arrival)
                    for r in run.records
                    if r.start is not None and r.end is not None
                )
                shares = [(i + 1) / len(delays) for i in range(len(delays))]
                ax.step([max(d, 1.0) for d in delays], shares, where="post", label=label(run))
                ax.set_xscale("log")
                ax.set_xlabel("seconds, log scale (under a second drawn at 1)")
        ax.set_ylabel(
            {
                "allocation": "share of cores held",
                "fragmentation": "free cores unusable by waiting jobs",
                "queueing": "share of jobs, queueing delay at most x",
                "completion": "share of jobs, completion time at most x",
            }[name]
        )
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, metadata={"Software": None})
        plt.close(fig)
        paths.append(path)
    return paths
