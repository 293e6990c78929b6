"""The image archives `make image` exported (a prerequisite of `make test`):
importable OCI archives whose driver image holds the venv and the entry point,
and whose config says what the Dockerfile says. Skipped when not built."""

import json
import struct
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pytest

from localsim import images
from localsim.images import ImageMissingError
from tests.deploy import ociarchive
from tests.deploy.dockerfile import parse

ROOT = Path(__file__).resolve().parents[2]


PT_INTERP = 3


def program_header_types(elf: bytes) -> list[int]:
    """The p_type of each program header of a little-endian ELF64 file."""
    (phoff,) = struct.unpack_from("<Q", elf, 32)
    size, count = struct.unpack_from("<HH", elf, 54)
    return [struct.unpack_from("<I", elf, phoff + i * size)[0] for i in range(count)]


def built(find: Callable[[], images.Image]) -> images.Image:
    try:
        return find()
    except ImageMissingError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def driver() -> tuple[images.Image, ociarchive.Archive]:
    image = built(images.driver_image)
    return image, ociarchive.read(image.archive)


def test_driver_archive_names_the_image_the_driver_looks_for(
    driver: tuple[images.Image, ociarchive.Archive],
) -> None:
    image, archive = driver
    assert archive.ref == image.ref
    assert image.archive.name == f"driver-{images.driver_key()}.tar"


def test_driver_config_is_what_the_dockerfile_says(
    driver: tuple[images.Image, ociarchive.Archive],
) -> None:
    final = parse((ROOT / "Dockerfile").read_text()).stages[-1]
    config = driver[1].config["config"]
    ((user,),) = [i.words() for i in final.all("USER")]
    assert config["User"] == user
    (entrypoint,) = [json.loads(i.args) for i in final.all("ENTRYPOINT")]
    assert config["Entrypoint"] == entrypoint == ["trainium-dra"]
    (cmd,) = [json.loads(i.args) for i in final.all("CMD")]
    assert config["Cmd"] == cmd
    assert config["WorkingDir"] == final.all("WORKDIR")[-1].args
    (path,) = [e for e in config["Env"] if e.startswith("PATH=")]
    assert path.startswith("PATH=/opt/venv/bin:")


def test_driver_image_holds_the_venv_and_the_entry_point(
    driver: tuple[images.Image, ociarchive.Archive],
) -> None:
    archive = driver[1]
    members = archive.members()
    script = members["opt/venv/bin/trainium-dra"]
    assert script.isfile() and script.mode & 0o111
    text = archive.read("opt/venv/bin/trainium-dra").decode()
    shebang = text.splitlines()[0]
    assert shebang == "#!/opt/venv/bin/python"
    assert "from driver.cli import main" in text
    # The venv's interpreter is the base image's, which must be in the image too.
    python = members["opt/venv/bin/python"]
    assert python.issym()
    target = PurePosixPath("/opt/venv/bin") / python.linkname
    assert str(target).lstrip("/") in members or python.linkname.lstrip("/") in members
    for path in ("app/driver/cli.py", "app/driver/kubeletplugin/protocol/gen/dra_v1_pb2.py"):
        assert members[path].isfile(), path
    assert not [m for m in members if m.startswith("opt/protoc")]  # builder only


def test_pause_archive_is_one_static_binary() -> None:
    image = built(images.pause_image)
    archive = ociarchive.read(image.archive)
    assert archive.ref == image.ref
    assert image.ref.startswith("localhost/trainium-dra/pause:3.")
    assert archive.config["config"]["Entrypoint"] == ["/pause"]
    assert (archive.config["os"], archive.config["architecture"]) == ("linux", "amd64")
    assert set(archive.members()) == {"pause"}
    binary = archive.read("pause")
    assert binary.startswith(b"\x7fELF\x02")  # ELF, 64-bit
    assert PT_INTERP not in program_header_types(binary)  # static: no loader in the image
