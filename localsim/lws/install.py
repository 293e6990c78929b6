"""Where `hack/lws/build.sh` put LeaderWorkerSet's manager and its manifests,
and a clear error when they are not there."""

from dataclasses import dataclass
from typing import ClassVar

from localsim.addon.install import ManagerInstall, ManagerMissingError

LWS_VERSION = "v0.7.0"
"""The LeaderWorkerSet release; matches hack/lws/go.mod (a unit test keeps them equal)."""


class LwsMissingError(ManagerMissingError):
    """LeaderWorkerSet is not built; the message names the target that builds it."""


@dataclass(frozen=True)
class LwsInstall(ManagerInstall):
    """The built manager and the module's `config/` (CRD, webhooks) beside it."""

    NAME: ClassVar[str] = "lws"
    TITLE: ClassVar[str] = "LeaderWorkerSet"
    VERSION: ClassVar[str] = LWS_VERSION
    MISSING: ClassVar[type[ManagerMissingError]] = LwsMissingError
    OFF: ClassVar[str] = "--without-lws"
