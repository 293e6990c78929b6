"""Render what the Grafana dashboards show, from a running Prometheus, as PNGs.

For docs/observability.md: one image per dashboard (every panel's queries,
over the last minutes, drawn with matplotlib as the panel type suggests) and
one image of the rack's chips as a server x chip grid.

    .venv/bin/python hack/render_panels.py --prometheus http://127.0.0.1:9090 \
        --ultraserver rack-a --node rack-a-node-00 --out docs/images
"""

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from localsim.prometheus import substitute

ROOT = Path(__file__).resolve().parents[1]
DASHBOARDS = ROOT / "charts" / "trainium-dra" / "dashboards"
Series = tuple[str, list[float], list[float]]  # legend, times, values


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def _get(self, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        body = httpx.get(f"{self.url}{path}", params=params, timeout=30.0).json()
        if body.get("status") != "success":
            raise SystemExit(f"{params['query']}: {body.get('error')}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        return self._get(
            "/api/v1/query_range", {"query": expr, "start": start, "end": end, "step": step}
        )

    def instant(self, expr: str, at: float) -> list[dict[str, Any]]:
        return self._get("/api/v1/query", {"query": expr, "time": at})


def legend(template: str, labels: dict[str, str]) -> str:
    if not template or template == "__auto":
        inner = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__")
        return inner or labels.get("__name__", "")
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template)


def natural(text: str) -> list[Any]:
    """Sort key that puts node-2 before node-10, chip 2 before chip 10 and
    histogram buckets (`le`) in numeric order."""
    try:
        return [float(text)]
    except ValueError:
        return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def panel_series(
    prom: Prometheus, panel: dict[str, Any], values: dict[str, str], window: tuple[float, float]
) -> list[Series]:
    start, end = window
    step = max(1.0, (end - start) / 120)
    found: list[Series] = []
    for target in panel["targets"]:
        expr = substitute(target["expr"], values)
        for r in prom.range(expr, start, end, step):
            times = [float(t) - end for t, _ in r["values"]]
            points = [float(v) for _, v in r["values"]]
            found.append((legend(target.get("legendFormat", ""), r["metric"]), times, points))
    return sorted(found, key=lambda s: natural(s[0]))


def draw_lines(ax: Axes, series: list[Series], unit: str) -> None:
    for name, times, points in series[:16]:
        ax.plot(times, points, label=name, linewidth=1.2)
    if unit == "s":  # latencies span milliseconds to minutes
        ax.set_yscale("log")
    if series:
        ax.legend(fontsize=6, ncol=2, loc="upper left")
    ax.set_xlabel("seconds before now", fontsize=7)
    ax.set_ylabel(unit or "value", fontsize=7)


def draw_rows(ax: Axes, series: list[Series], unit: str) -> None:
    """Heat map / state timeline: one row per series, time left to right."""
    if not series:
        return
    width = max(len(s[2]) for s in series)
    grid = [s[2] + [math.nan] * (width - len(s[2])) for s in series]
    top = 2.0 if unit == "state" else max(1.0, *(max(r) for r in grid if r))
    cmap = "RdYlGn_r" if unit == "state" else "turbo"
    times = series[0][1]
    image = ax.imshow(
        grid,
        aspect="auto",
        cmap=cmap,
        vmin=0,
        vmax=top,
        interpolation="nearest",
        extent=(times[0], times[-1] if len(times) > 1 else 0.0, len(series) - 0.5, -0.5),
    )
    every = max(1, len(series) // 24)
    ax.set_yticks(range(0, len(series), every))
    ax.set_yticklabels([s[0] for s in series][::every], fontsize=5)
    ax.set_xlabel("seconds before now", fontsize=7)
    plt.colorbar(image, ax=ax, fraction=0.04)


def draw_bars(ax: Axes, series: list[Series], unit: str) -> None:
    """Stat, bar gauge, table: the latest value of each series."""
    names = [s[0] for s in series][:40]
    latest = [s[2][-1] for s in series][:40]
    ax.barh(range(len(names)), latest, color="tab:blue")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=6)
    ax.invert_yaxis()
    for i, value in enumerate(latest):
        ax.text(value, i, f" {value:.3g}", va="center", fontsize=6)
    ax.set_xlabel(unit or "value", fontsize=7)


def draw_stat(ax: Axes, series: list[Series], unit: str) -> None:
    """Stat: the latest value, large, as Grafana shows it."""
    ax.axis("off")
    for i, (name, _, points) in enumerate(series[:4]):
        value = points[-1]
        text = f"{value:.1%}" if unit == "percentunit" else f"{value:.4g}"
        ax.text(0.5, 0.6 - 0.3 * i, text, ha="center", fontsize=28, transform=ax.transAxes)
        ax.text(0.5, 0.45 - 0.3 * i, name, ha="center", fontsize=8, transform=ax.transAxes)


def draw_table(ax: Axes, results: list[dict[str, Any]]) -> None:
    """Table: the labels of each series, one per line (target labels left out)."""
    ax.axis("off")
    hidden = {"__name__", "instance", "job"}
    for i, r in enumerate(results[:4]):
        labels = "\n".join(f"{k} = {v}" for k, v in sorted(r["metric"].items()) if k not in hidden)
        ax.text(
            0.02 + 0.25 * i,
            0.95,
            labels,
            fontsize=8,
            family="monospace",
            va="top",
            transform=ax.transAxes,
            in_layout=False,
        )


def render_dashboard(
    prom: Prometheus, document: dict[str, Any], values: dict[str, str], window: tuple[float, float]
) -> Figure:
    panels = document["panels"]
    cols = 2
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(14, 3.4 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels, strict=False):
        kind = panel["type"]
        unit = panel["fieldConfig"]["defaults"].get("unit", "")
        if kind == "state-timeline":
            unit = "state"
        series = panel_series(prom, panel, values, window)
        if kind in ("heatmap", "state-timeline"):
            draw_rows(ax, series, unit)
        elif kind == "stat":
            draw_stat(ax, series, unit)
        elif kind == "table":
            expr = substitute(panel["targets"][0]["expr"], values)
            draw_table(ax, prom.range(expr, window[0], window[1], window[1] - window[0]))
        elif kind == "bargauge":
            draw_bars(ax, series, unit)
        else:
            draw_lines(ax, series, unit)
        ax.set_title(f"{panel['title']} ({kind})", fontsize=9)
        ax.tick_params(labelsize=6)
        if not series:
            ax.text(0.5, 0.5, "no data", ha="center", transform=ax.transAxes)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(f"{document['title']}  ({', '.join(f'{k}={v}' for k, v in values.items())})")
    fig.tight_layout()
    return fig


def render_rack_grid(prom: Prometheus, ultraserver: str, at: float) -> Figure:
    """The rack's chips, server by chip, coloured by their average core utilization."""
    expr = f'chip:neuroncore_utilization_ratio:avg{{ultraserver="{ultraserver}"}}'
    result = prom.instant(expr, at)
    nodes = sorted({r["metric"]["node"] for r in result}, key=natural)
    chips = sorted({int(r["metric"]["chip"]) for r in result})
    grid = [[math.nan] * len(nodes) for _ in chips]
    for r in result:
        grid[chips.index(int(r["metric"]["chip"]))][nodes.index(r["metric"]["node"])] = float(
            r["value"][1]
        )
    fig, ax = plt.subplots(figsize=(14, 2.6))
    image = ax.imshow(grid, cmap="turbo", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(nodes)))
    ax.set_xticklabels(nodes, rotation=90, fontsize=6)
    ax.set_yticks(range(len(chips)))
    ax.set_yticklabels([f"chip {c}" for c in chips], fontsize=7)
    ax.set_title(f"{ultraserver}: utilization of {len(result)} chips (server x chip)", fontsize=9)
    plt.colorbar(image, ax=ax, fraction=0.03)
    fig.tight_layout()
    return fig


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prometheus", required=True, help="URL of a running Prometheus")
    p.add_argument("--ultraserver", required=True, help="value of $ultraserver")
    p.add_argument("--node", required=True, help="value of $node (node detail)")
    p.add_argument("--minutes", type=float, default=5.0, help="time range drawn")
    p.add_argument("--rate-interval", default="15s", help="value of $__rate_interval")
    p.add_argument("--end", type=float, default=None, help="unix time the range ends (now)")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = p.parse_args(argv)
    prom = Prometheus(args.prometheus)
    end = args.end or time.time()
    window = (end - args.minutes * 60, end)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in sorted(DASHBOARDS.glob("*.json")):
        document = json.loads(path.read_text())
        values = {"ultraserver": args.ultraserver, "__rate_interval": args.rate_interval}
        text = json.dumps(document)
        if "$node" in text:
            multi = 'node=~\\"$node\\"' in text
            values["node"] = ".*" if multi else args.node
        fig = render_dashboard(prom, document, values, window)
        fig.savefig(args.out / f"{path.stem}.png", dpi=90)
        plt.close(fig)
        print(f"wrote {args.out / path.stem}.png")
    fig = render_rack_grid(prom, args.ultraserver, end)
    fig.savefig(args.out / "trainium-rack-chips.png", dpi=90)
    plt.close(fig)
    print(f"wrote {args.out / 'trainium-rack-chips.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
