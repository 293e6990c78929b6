"""Where `hack/kueue/build.sh` put Kueue's manager and its manifests, and a
clear error when they are not there."""

import os
from dataclasses import dataclass
from pathlib import Path

from driver.localsim.controlplane.binaries import cache_root

KUEUE_VERSION = "v0.17.0"
"""The Kueue release; matches hack/kueue/go.mod (a unit test keeps them equal)."""


class KueueMissingError(RuntimeError):
    """Kueue is not built; the message names the target that builds it."""


@dataclass(frozen=True)
class KueueInstall:
    """The built manager and the module's `config/` (CRDs, webhooks) beside it."""

    directory: Path

    @property
    def binary(self) -> Path:
        return self.directory / "kueue"

    @property
    def crd_dir(self) -> Path:
        return self.directory / "config" / "crd"

    @property
    def webhook_dir(self) -> Path:
        return self.directory / "config" / "webhook"

    @classmethod
    def locate(cls, cache: Path | None = None) -> "KueueInstall":
        found = cls((cache or cache_root()) / f"kueue-{KUEUE_VERSION}")
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
            raise KueueMissingError(
                f"--with-kueue: Kueue {KUEUE_VERSION} missing ({', '.join(missing)}); "
                "build it with `make kueue` (hack/kueue/build.sh)"
            )
        return found
