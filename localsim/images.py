"""Where the locally built container images are, and a clear error when they are not.

`make image` (hack/images/build.sh) builds the driver image and the sandbox
(pause) image without a registry and exports each as an OCI archive into a
cache outside the repo, for `ctr -n k8s.io images import`. The driver
archive is keyed by the content of everything its build reads, so a stale
one is never mistaken for the current sources; this module only finds them.
"""

import hashlib
import json
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from localsim.controlplane.binaries import cache_root

ROOT = Path(__file__).resolve().parents[1]
DRIVER_REPOSITORY = "localhost/trainium-dra/driver"
PAUSE = "pause"
REF_NAME = "org.opencontainers.image.ref.name"

DRIVER_INPUTS = (
    "Dockerfile",
    ".dockerignore",
    "pyproject.toml",
    "uv.lock",
    "README.md",
    "hack/gen_protos.py",
    "hack/images/python-base.sh",
    "driver",
    "simdevice",
)
"""What the driver image's build reads: the Dockerfile's context (what it
COPYs), the Dockerfile itself, and the recipe of the local base image."""


class ImageMissingError(RuntimeError):
    """An image archive is not where `make image` puts it."""


@dataclass(frozen=True)
class Image:
    ref: str  # the full name containerd gives it on import
    archive: Path


def images_dir() -> Path:
    return cache_root() / "images"


def _inputs(root: Path) -> Iterator[Path]:
    """Input files in a stable order, leaving out what .dockerignore keeps out of
    the build (generated modules, bytecode)."""
    for name in DRIVER_INPUTS:
        path = root / name
        if path.is_file():
            yield path
            continue
        for f in sorted(path.rglob("*")):
            rel = f.relative_to(root).as_posix()
            if not f.is_file() or "__pycache__" in f.parts or f.suffix == ".pyc":
                continue
            if rel.startswith("driver/kubeletplugin/protocol/gen/"):
                continue
            yield f


def driver_key(root: Path = ROOT) -> str:
    """16 hex digits of a hash of the driver image's inputs under `root`."""
    h = hashlib.sha256()
    for f in _inputs(root):
        data = f.read_bytes()
        h.update(f"{f.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


def archive_ref(archive: Path) -> str:
    """The image name an OCI archive's index.json gives its (single) image."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        if member is None:
            raise ImageMissingError(f"{archive}: index.json is not a file")
        index = json.load(member)
    (manifest,) = index["manifests"]
    return str(manifest["annotations"][REF_NAME])


def driver_image(root: Path = ROOT, directory: Path | None = None) -> Image:
    """The driver image built from the sources under `root`."""
    key = driver_key(root)
    archive = (directory or images_dir()) / f"driver-{key}.tar"
    ref = f"{DRIVER_REPOSITORY}:{key}"
    if not archive.is_file():
        raise ImageMissingError(
            f"image {ref} is not built for these sources: no {archive}; run `make image`"
        )
    return Image(ref, archive)


def pause_image(directory: Path | None = None) -> Image:
    """The sandbox image: the newest pause archive `make image` exported."""
    link = (directory or images_dir()) / f"{PAUSE}.tar"
    if not link.is_file():
        raise ImageMissingError(
            f"the sandbox (pause) image is not built: no {link}; run `make image`"
        )
    archive = link.resolve()
    return Image(archive_ref(archive), archive)


if __name__ == "__main__":
    # hack/images/build.sh names the driver image with this key.
    if sys.argv[1:] != ["driver-key"]:
        sys.exit("usage: python -m localsim.images driver-key")
    print(driver_key())
