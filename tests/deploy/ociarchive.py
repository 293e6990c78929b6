"""A reader of OCI image archives for tests: what `ctr images import` relies on
(layout marker, index, manifest, config, blobs matching their digests)."""

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"


@dataclass(frozen=True)
class Archive:
    index: dict[str, Any]
    manifest: dict[str, Any]
    config: dict[str, Any]
    layers: list[bytes]  # uncompressed

    @property
    def ref(self) -> str:
        (entry,) = self.index["manifests"]
        return str(entry["annotations"]["org.opencontainers.image.ref.name"])

    def members(self) -> dict[str, tarfile.TarInfo]:
        """Every path in the image's layers, later layers winning."""
        out: dict[str, tarfile.TarInfo] = {}
        for layer in self.layers:
            with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
                for info in tar.getmembers():
                    out[info.name.removeprefix("./").rstrip("/")] = info
        return out

    def read(self, path: str) -> bytes:
        """A regular file's bytes, from the last layer that has it."""
        for layer in reversed(self.layers):
            with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
                for name in (path, f"./{path}"):
                    try:
                        f = tar.extractfile(name)
                    except KeyError:
                        continue
                    if f is not None:
                        return f.read()
        raise KeyError(path)


def _blob(tar: tarfile.TarFile, descriptor: dict[str, Any]) -> bytes:
    algorithm, _, hexdigest = descriptor["digest"].partition(":")
    assert algorithm == "sha256", descriptor
    f = tar.extractfile(f"blobs/sha256/{hexdigest}")
    assert f is not None, descriptor
    data = f.read()
    assert hashlib.sha256(data).hexdigest() == hexdigest, descriptor["digest"]
    assert len(data) == descriptor["size"], descriptor
    return data


def read(path: Path) -> Archive:
    """The archive's single image, every blob checked against its descriptor."""
    with tarfile.open(path) as tar:
        layout = tar.extractfile("oci-layout")
        assert layout is not None
        assert json.load(layout) == {"imageLayoutVersion": "1.0.0"}
        f = tar.extractfile("index.json")
        assert f is not None
        index = json.load(f)
        assert index["schemaVersion"] == 2
        (entry,) = index["manifests"]
        assert entry["mediaType"] == MANIFEST
        manifest = json.loads(_blob(tar, entry))
        assert manifest["schemaVersion"] == 2
        assert manifest.get("mediaType", MANIFEST) == MANIFEST
        config = json.loads(_blob(tar, manifest["config"]))
        layers = []
        for descriptor in manifest["layers"]:
            data = _blob(tar, descriptor)
            if descriptor["mediaType"].endswith("+gzip"):
                data = gzip.decompress(data)
            layers.append(data)
    diff_ids = ["sha256:" + hashlib.sha256(layer).hexdigest() for layer in layers]
    assert config["rootfs"] == {"type": "layers", "diff_ids": diff_ids}
    history = [h for h in config.get("history", []) if not h.get("empty_layer")]
    assert len(history) == len(layers), "buildah needs a history entry per layer"
    return Archive(index, manifest, config, layers)
