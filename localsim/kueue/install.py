"""Where `hack/kueue/build.sh` put Kueue's manager and its manifests, and a
clear error when they are not there."""

from dataclasses import dataclass
from typing import ClassVar

from localsim.addon.install import ManagerInstall, ManagerMissingError

KUEUE_VERSION = "v0.17.0"
"""The Kueue release; matches hack/kueue/go.mod (a unit test keeps them equal)."""


class KueueMissingError(ManagerMissingError):
    """Kueue is not built; the message names the target that builds it."""


@dataclass(frozen=True)
class KueueInstall(ManagerInstall):
    """The built manager and the module's `config/` (CRDs, webhooks) beside it."""

    NAME: ClassVar[str] = "kueue"
    TITLE: ClassVar[str] = "Kueue"
    VERSION: ClassVar[str] = KUEUE_VERSION
    MISSING: ClassVar[type[ManagerMissingError]] = KueueMissingError
