"""The plots of docs/scale.md: each projected figure's measured points and its
fitted line out to a million chips, log-log."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchmarks.scalefit import MILLION_CHIP_RACKS, Line


def plot(path: Path, title: str, unit: str, line: Line) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
    ax.plot([x for x, _ in line.points], [y for _, y in line.points], "o", label="measured")
    grid = [1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, float(MILLION_CHIP_RACKS)]
    ax.plot(grid, [max(line.at(x), 1e-9) for x in grid], "-", label="fitted line")
    ax.axvline(MILLION_CHIP_RACKS, color="grey", linestyle=":", label="6,944 racks (1M chips)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Trn3 Gen2 racks")
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
