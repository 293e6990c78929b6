"""The health a set of faults leaves a simulated chip, and which places (a
whole chip, or one core of it) they leave unhealthy.

Pure: faults in, `ChipHealth` out. `server.py` asks it for its chips; the
node daemon reports the places in `place_order`.
"""

from collections.abc import Iterable

from simdevice.faults import Fault, FaultKind
from simdevice.telemetry import ChipHealth


def summarize(faults: Iterable[Fault]) -> ChipHealth:
    """The health a set of faults leaves: failed on an uncorrected error,
    degraded on a hang or a link down, else healthy (corrected errors)."""
    ordered = sorted(faults, key=lambda f: (f.kind.value, f.core or 0))
    failed = [f for f in ordered if f.uncorrected]
    if failed:
        return ChipHealth("failed", "; ".join(_describe(f) for f in failed))
    degraded = [f for f in ordered if f.kind in (FaultKind.CORE_HANG, FaultKind.LINK_DOWN)]
    if degraded:
        return ChipHealth("degraded", "; ".join(_describe(f) for f in degraded))
    return ChipHealth("healthy", "")


def fault_health(faults: Iterable[Fault]) -> dict[tuple[int, int | None], ChipHealth]:
    """Unhealthy (chip, core-or-None) places of a set of faults."""
    places: dict[tuple[int, int | None], list[Fault]] = {}
    for fault in faults:
        places.setdefault((fault.chip, fault.core), []).append(fault)
    out = {place: summarize(group) for place, group in places.items()}
    return {p: out[p] for p in sorted(out, key=place_order) if out[p].state != "healthy"}


def place_order(place: tuple[int, int | None]) -> tuple[int, int]:
    """Chip by chip; a whole chip before its single cores."""
    chip, core = place
    return (chip, -1 if core is None else core)


def _describe(fault: Fault) -> str:
    texts = {
        FaultKind.ECC_UNCORRECTED_HBM: "uncorrected HBM ECC error",
        FaultKind.ECC_UNCORRECTED_SRAM: "uncorrected SRAM ECC error",
        FaultKind.CORE_HANG: "core hung",
        FaultKind.LINK_DOWN: "NeuronLink down",
    }
    where = "" if fault.core is None else f" (core {fault.core})"
    return texts.get(fault.kind, fault.kind.value) + where
