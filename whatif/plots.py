"""The report's plots: allocation and fragmentation over time, and the
distributions of queueing delay and completion time, one line per replay;
and per replay a timeline of its first racks, a bar for every server a job
held from its start to its end, so starvation and fragmentation can be seen."""

from collections.abc import Sequence
from pathlib import Path

from whatif.replay import Replay

PLOTS = ("allocation", "fragmentation", "queueing", "completion")
TIMELINE_RACKS = 4
KIND_COLOURS = {
    "cores": "tab:blue",
    "chips": "tab:orange",
    "server": "tab:green",
    "rack": "tab:red",
}


def label(run: Replay) -> str:
    queueing = "" if run.policy == "kube-scheduler" else f" {run.queueing}"
    return f"{run.policy}{queueing}, gangs {'on' if run.gangs else 'off'}"


def timeline_name(run: Replay) -> str:
    return "timeline-" + label(run).replace(", gangs ", "-gangs-").replace(" ", "-") + ".png"


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


def write_timelines(out: Path, runs: Sequence[Replay]) -> list[Path]:
    """One PNG per replay (`timeline_name`): its first TIMELINE_RACKS racks,
    one row per server, one bar per job on each server it held."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    paths = []
    for run in runs:
        racks = min(run.racks, TIMELINE_RACKS)
        fig, axes = plt.subplots(
            racks, 1, figsize=(8, 1.2 + 1.6 * racks), dpi=100, sharex=True, squeeze=False
        )
        for record in run.records:
            if record.start is None or record.end is None:
                continue
            span = ((record.start / 3600, (record.end - record.start) / 3600),)
            colour = KIND_COLOURS[record.job.shape.kind]
            for r, s in record.servers:
                if r < racks:
                    axes[r][0].broken_barh(span, (s - 0.4, 0.8), color=colour, alpha=0.35)
        for r in range(racks):
            ax = axes[r][0]
            ax.set_ylim(-0.5, run.rack.servers - 0.5)
            ax.set_ylabel(f"rack {r}\nserver")
        axes[-1][0].set_xlabel("simulated hours")
        handles = [Patch(color=c, alpha=0.5, label=k) for k, c in KIND_COLOURS.items()]
        axes[0][0].legend(handles=handles, fontsize=7, ncol=4, loc="upper right")
        axes[0][0].set_title(label(run), fontsize=9)
        fig.tight_layout()
        path = out / timeline_name(run)
        fig.savefig(path, metadata={"Software": None})
        plt.close(fig)
        paths.append(path)
    return paths
