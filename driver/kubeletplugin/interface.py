"""What the kubelet-facing machinery needs from the driver behind it: prepare
and unprepare claims by reference, and say per claim what was prepared."""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ClaimRef:
    """A claim as the kubelet names it."""

    namespace: str
    uid: str
    name: str


@dataclass(frozen=True)
class PreparedDevice:
    request: str
    pool: str
    device: str
    cdi_device_ids: tuple[str, ...]
    share_id: str | None = None


@dataclass(frozen=True)
class PrepareResult:
    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


class ClaimPreparer(Protocol):
    def prepare(self, claims: Iterable[ClaimRef]) -> dict[str, PrepareResult]:
        """Per claim UID its devices or its error; one claim's error never affects another's."""
        ...

    def unprepare(self, claims: Iterable[ClaimRef]) -> dict[str, str]:
        """Per claim UID its error, "" on success."""
        ...
