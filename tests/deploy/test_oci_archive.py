"""The OCI archive writer (hack/images/oci_archive.py) that packages the pause
and Python base images: digests, index and manifest structure, layer contents."""

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

from hack.images import oci_archive
from hack.images.oci_archive import Config, File
from tests.deploy import ociarchive

REF = "localhost/trainium-dra/pause:3.10.2"


def write(path: Path, files: list[File], config: Config) -> str:
    return oci_archive.write(path, REF, io.BytesIO(oci_archive.layer_tar(files)), config)


def test_a_one_file_image_reads_back_with_every_digest_right(tmp_path: Path) -> None:
    out = tmp_path / "pause.tar"
    digest = write(out, [File("/pause", b"\x7fELF binary", 0o755)], Config(entrypoint=["/pause"]))
    archive = ociarchive.read(out)  # checks layout, digests, sizes and diff_ids
    (entry,) = archive.index["manifests"]
    assert entry["digest"] == digest
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    assert entry["annotations"] == {
        "org.opencontainers.image.ref.name": REF,
        "io.containerd.image.name": REF,
    }
    assert archive.index["mediaType"] == ociarchive.INDEX
    assert archive.manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    (layer,) = archive.manifest["layers"]
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
    assert archive.config["os"] == "linux" and archive.config["architecture"] == "amd64"
    assert archive.config["config"] == {"Entrypoint": ["/pause"]}
    info = archive.members()["pause"]
    assert info.isfile() and info.mode == 0o755 and (info.uid, info.gid) == (0, 0)
    assert archive.read("pause") == b"\x7fELF binary"


def test_the_archive_holds_exactly_the_blobs_the_manifest_names(tmp_path: Path) -> None:
    out = tmp_path / "a.tar"
    write(out, [File("/a", b"a")], Config())
    archive = ociarchive.read(out)
    with tarfile.open(out) as tar:
        blobs = {n for n in tar.getnames() if n.startswith("blobs/sha256/")}
    named = [archive.index["manifests"][0], archive.manifest["config"], *archive.manifest["layers"]]
    assert blobs == {"blobs/sha256/" + d["digest"].removeprefix("sha256:") for d in named}
    assert not (tmp_path / "a.tar.partial").exists()


def test_same_files_same_digests(tmp_path: Path) -> None:
    files = [File("/usr/bin/tool", b"x" * 5000, 0o755), File("/etc/tool.conf", b"k=v\n")]
    config = Config(entrypoint=["/usr/bin/tool"], env=["A=1"], cmd=["--x"])
    first = write(tmp_path / "1.tar", files, config)
    second = write(tmp_path / "2.tar", list(reversed(files)), config)
    assert first == second
    assert (tmp_path / "1.tar").read_bytes() == (tmp_path / "2.tar").read_bytes()


def test_layer_has_parent_directories_before_their_files() -> None:
    layer = oci_archive.layer_tar([File("/usr/bin/tool", b"x", 0o755), File("/etc/c", b"")])
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        members = [(m.name, m.isdir()) for m in tar.getmembers()]
    assert members == [
        ("etc", True),
        ("etc/c", False),
        ("usr", True),
        ("usr/bin", True),
        ("usr/bin/tool", False),
    ]


def test_gzip_layer_is_independent_of_time_and_name() -> None:
    """No mtime or file name in the gzip header: the compressed digest depends
    on the layer alone."""
    with io.BytesIO() as blob:
        diff_id, digest, size = oci_archive._compress(io.BytesIO(b"layer"), blob)
        data = blob.getvalue()
    assert data[4:8] == b"\0\0\0\0"  # MTIME
    assert gzip.decompress(data) == b"layer"
    assert diff_id == "sha256:" + hashlib.sha256(b"layer").hexdigest()
    assert (digest, size) == ("sha256:" + hashlib.sha256(data).hexdigest(), len(data))


def test_command_line_packages_a_root_filesystem_tar(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs.tar"
    rootfs.write_bytes(oci_archive.layer_tar([File("/usr/bin/python3", b"py", 0o755)]))
    out = tmp_path / "base.tar"
    oci_archive.main(
        [
            *("--out", str(out), "--ref", REF, "--layer-tar", str(rootfs)),
            *("--env", "PATH=/usr/bin", "--cmd", json.dumps(["python3"])),
        ]
    )
    archive = ociarchive.read(out)
    assert archive.config["config"] == {"Cmd": ["python3"], "Env": ["PATH=/usr/bin"]}
    assert archive.layers == [rootfs.read_bytes()]


def test_command_line_packages_files(tmp_path: Path) -> None:
    binary = tmp_path / "pause"
    binary.write_bytes(b"\x7fELF")
    out = tmp_path / "pause.tar"
    oci_archive.main(
        [
            *("--out", str(out), "--ref", REF, "--file", f"{binary}:/pause:0755"),
            *("--entrypoint", '["/pause"]'),
        ]
    )
    archive = ociarchive.read(out)
    assert archive.members()["pause"].mode == 0o755
    assert archive.ref == REF
