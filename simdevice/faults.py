"""Hardware faults that can be injected into a simulated server.

What each does (applied by simdevice.server.ServerSim):
- ecc-corrected-sram / ecc-corrected-hbm: counted; work goes on.
- ecc-uncorrected-sram: fails the job running on the core (every core of the
  chip when no core is named); the chip is "failed" until the fault is cleared.
- ecc-uncorrected-hbm: fails every job on the chip; the chip is "failed" until cleared.
- core-hang: the core stops making progress (its job stalls, new jobs queue
  behind it); the chip is "degraded" until cleared, then the job resumes.
- link-down: the chip's NeuronLinks are down; jobs that communicate between
  chips fail on it; the chip is "degraded" until cleared.
"""

from dataclasses import dataclass
from enum import StrEnum


class FaultKind(StrEnum):
    ECC_CORRECTED_SRAM = "ecc-corrected-sram"
    ECC_UNCORRECTED_SRAM = "ecc-uncorrected-sram"
    ECC_CORRECTED_HBM = "ecc-corrected-hbm"
    ECC_UNCORRECTED_HBM = "ecc-uncorrected-hbm"
    CORE_HANG = "core-hang"
    LINK_DOWN = "link-down"


FAULT_KINDS: tuple[str, ...] = tuple(k.value for k in FaultKind)
# Kinds that take a core, and kinds that must name one.
CORE_FAULTS = frozenset(
    {FaultKind.ECC_CORRECTED_SRAM, FaultKind.ECC_UNCORRECTED_SRAM, FaultKind.CORE_HANG}
)
NEEDS_CORE = frozenset({FaultKind.CORE_HANG})


class FaultError(ValueError):
    """A fault that names nothing real; the message starts with the field."""


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    chip: int  # local chip index on the server
    core: int | None = None  # physical core on the chip

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", FaultKind(self.kind))
        except ValueError:
            raise FaultError(
                f"kind: {self.kind!r} is not one of {', '.join(FAULT_KINDS)}"
            ) from None
        if self.chip < 0:
            raise FaultError(f"chip: must be >= 0, got {self.chip}")
        if self.core is None and self.kind in NEEDS_CORE:
            raise FaultError(f"core: {self.kind.value} needs the core that hangs")
        if self.core is not None and self.kind not in CORE_FAULTS:
            raise FaultError(f"core: {self.kind.value} affects a whole chip; leave core unset")
        if self.core is not None and self.core < 0:
            raise FaultError(f"core: must be >= 0, got {self.core}")

    @property
    def uncorrected(self) -> bool:
        return self.kind in (FaultKind.ECC_UNCORRECTED_SRAM, FaultKind.ECC_UNCORRECTED_HBM)

    @property
    def ecc(self) -> bool:
        return self.kind.value.startswith("ecc-")
