"""`trainium-dra top`: live per-core utilization of a rack, like neuron-top.

It reads `neuroncore_utilization_ratio` from the metrics of the daemons that
serve the rack (`Daemons`, on stand-in or real nodes), one row per node, one
cell per physical core (grouped by chip), and redraws the screen every
interval.
"""

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from localsim.clusterspec import ClusterRack, ClusterSpec
from localsim.commands.flags import TopFlags, parse_top
from localsim.commands.running import NotRunningError, open_running
from localsim.daemons import Daemons, DaemonUnreachableError
from simdevice.topology import rack_spec

SHADES = " ▁▂▃▄▅▆▇█"
CLEAR = "\x1b[H\x1b[2J"


@dataclass(frozen=True)
class Sample:
    """Utilization (0..1) per node and physical core, and jobs finished so far."""

    cores: Mapping[str, Mapping[int, float]]
    completed: float


def parse_metrics(text: str) -> Sample:
    cores: dict[str, dict[int, float]] = {}
    completed = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "neuroncore_utilization_ratio":
                cores.setdefault(s.labels["node"], {})[int(s.labels["neuroncore"])] = s.value
            elif s.name == "execution_status_total" and s.labels.get("status_type") == "completed":
                completed += s.value
    return Sample(cores, completed)


def parse_all(texts: Sequence[str]) -> Sample:
    """One sample of a rack from its daemons' metrics (one daemon per rack
    in the stand-in, one per node on real nodes)."""
    samples = [parse_metrics(t) for t in texts]
    cores = {node: c for s in samples for node, c in s.cores.items()}
    return Sample(cores, sum(s.completed for s in samples))


def shade(ratio: float) -> str:
    ratio = min(max(ratio, 0.0), 1.0)
    return SHADES[min(len(SHADES) - 1, round(ratio * (len(SHADES) - 1)))]


def render(rack: ClusterRack, sample: Sample, now: str, idle_rows: bool = True) -> str:
    """The screen: a header, then one row per node with one cell per core
    (without `idle_rows`, nodes with every core idle are counted, not drawn)."""
    spec = rack_spec(rack.generation)
    per_chip = spec.chip.cores
    per_node = per_chip * spec.chips_per_server
    values = [v for node in sample.cores.values() for v in node.values()]
    busy = sum(1 for v in values if v > 0.01)
    mean = sum(values) / len(values) if values else 0.0
    lines = [
        f"trainium-dra top — {rack.name} ({rack.generation}, {rack.nodes} nodes, "
        f"{rack.nodes * per_node} cores)   {now}",
        f"rack utilization {mean:6.1%}   busy cores {busy}/{len(values)}   "
        f"jobs completed {sample.completed:.0f}",
        f"one cell per NeuronCore, chips separated by '|'; scale '{SHADES}' = 0..100%",
        "",
    ]
    idle = 0
    for server in range(rack.nodes):
        node = rack.node_name(server)
        cores = sample.cores.get(node, {})
        if not idle_rows and not any(v > 0.01 for v in cores.values()):
            idle += 1
            continue
        cells = "|".join(
            "".join(shade(cores.get(chip * per_chip + c, 0.0)) for c in range(per_chip))
            for chip in range(spec.chips_per_server)
        )
        node_mean = sum(cores.values()) / per_node if cores else 0.0
        lines.append(f"{node:<{len(rack.node_name(rack.nodes - 1))}}  {node_mean:6.1%}  |{cells}|")
    if idle:
        lines.append(f"({idle} idle nodes not shown)")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    flags = parse_top(argv)
    try:
        with open_running(flags.paths) as cluster:
            return show(cluster.spec, cluster.daemons, flags)
    except NotRunningError as err:
        print(f"trainium-dra top: {err}", file=sys.stderr)
        return 1


def show(spec: ClusterSpec, daemons: Daemons, flags: TopFlags) -> int:
    names = [r.name for r in spec.racks]
    rack = next((r for r in spec.racks if r.name == (flags.rack or names[0])), None)
    if rack is None:
        print(f"--rack: {flags.rack!r} is not one of {', '.join(names)}", file=sys.stderr)
        return 2
    shown = 0
    try:
        while flags.iterations is None or shown < flags.iterations:
            sample = parse_all(daemons.metrics(rack))
            tty = sys.stdout.isatty()
            screen = render(rack, sample, time.strftime("%H:%M:%S"), idle_rows=tty)
            prefix = CLEAR if tty else ("\n" if shown else "")
            print(prefix + screen, flush=True)
            shown += 1
            if flags.iterations is None or shown < flags.iterations:
                time.sleep(flags.interval)
    except KeyboardInterrupt:
        pass
    except DaemonUnreachableError as err:
        print(f"trainium-dra top: {err}", file=sys.stderr)
        return 1
    return 0
