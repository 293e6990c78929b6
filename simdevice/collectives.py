"""Collectives across chips over NeuronLink and the NeuronSwitch levels:
a bandwidth + latency (alpha-beta) model of ring algorithms.

A ring over p chips moves (p-1)/p of the data per phase through each chip's
links; every step pays the latency of the switch levels it crosses (one level
inside a server, two between servers on NeuronSwitch racks; ring hops on the
Trn2 torus). All-reduce is reduce-scatter + all-gather: two phases.
"""

from dataclasses import dataclass

from simdevice.topology import RackSpec

COLLECTIVES: tuple[str, ...] = ("all-reduce", "all-gather")
STEP_OVERHEAD = 2.0e-6  # seconds of software/sync cost per ring step


@dataclass(frozen=True)
class CollectiveTiming:
    duration: float
    bytes_per_chip: float  # bytes each chip sends over its links
    steps: int
    levels: int  # switch levels (or ring hops) crossed per step


def collective_time(kind: str, spec: RackSpec, chips: int, nbytes: float) -> CollectiveTiming:
    """Time of one collective over `chips` chips of `spec` on `nbytes` per chip
    (all-reduce: the buffer reduced; all-gather: the gathered result)."""
    if kind not in COLLECTIVES:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(COLLECTIVES)}")
    if not 1 <= chips <= spec.chips:
        raise ValueError(f"chips: must be in [1, {spec.chips}] for {spec.generation}, got {chips}")
    if nbytes < 0:
        raise ValueError(f"bytes: must be >= 0, got {nbytes}")
    if chips == 1:
        return CollectiveTiming(0.0, 0.0, 0, 0)
    fabric = spec.fabric
    levels = (
        fabric.intra_server_levels if chips <= spec.chips_per_server else fabric.inter_server_levels
    )
    phases = 2 if kind == "all-reduce" else 1
    steps = phases * (chips - 1)
    sent = phases * (chips - 1) / chips * nbytes
    alpha = levels * fabric.level_latency + STEP_OVERHEAD
    duration = steps * alpha + sent / spec.chip.link_bandwidth
    return CollectiveTiming(duration, sent, steps, levels)
