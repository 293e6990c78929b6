"""Where a `hack/<name>/build.sh` (hack/lib/build-manager.sh) put a manager and
its module's manifests, and a clear error naming the make target when they are
not there."""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Self

from localsim.controlplane.binaries import cache_root


class ManagerMissingError(RuntimeError):
    """The manager is not built; the message names the target that builds it."""


@dataclass(frozen=True)
class ManagerInstall:
    """The built manager and the module's `config/` (CRDs, webhooks) beside it,
    in `<cache>/<NAME>-<VERSION>/`; a subclass names one manager."""

    NAME: ClassVar[str]
    """The binary, the make target, hack/<NAME>/, `up --with-<NAME>`."""
    TITLE: ClassVar[str]
    """How messages name it."""
    VERSION: ClassVar[str]
    """The release hack/<NAME>/go.mod pins (a unit test keeps them equal)."""
    MISSING: ClassVar[type[ManagerMissingError]] = ManagerMissingError
    OFF: ClassVar[str] = ""
    """The `up` flag that starts the cluster without it, where it is on by default."""

    directory: Path

    @property
    def binary(self) -> Path:
        return self.directory / self.NAME

    @property
    def crd_dir(self) -> Path:
        return self.directory / "config" / "crd"

    @property
    def webhook_dir(self) -> Path:
        return self.directory / "config" / "webhook"

    @classmethod
    def locate(cls, cache: Path | None = None) -> Self:
        found = cls((cache or cache_root()) / f"{cls.NAME}-{cls.VERSION}")
        missing = [
            str(path)
            for path, ok in (
                (found.binary, os.access(found.binary, os.X_OK)),
                (found.crd_dir, found.crd_dir.is_dir()),
                (found.webhook_dir, found.webhook_dir.is_dir()),
            )
            if not ok
        ]
        if missing:
            raise cls.MISSING(
                f"--with-{cls.NAME}: {cls.TITLE} {cls.VERSION} missing ({', '.join(missing)}); "
                f"build it with `make {cls.NAME}` (hack/{cls.NAME}/build.sh)"
                + (f", or start without it ({cls.OFF})" if cls.OFF else "")
            )
        return found
