"""Finding the image archives `make image` exports: keys that follow the build's
inputs, names read from the archives, and clear errors when one is missing."""

import io
import shutil
from pathlib import Path

import pytest

from hack.images import oci_archive
from localsim import images
from localsim.images import ImageMissingError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A minimal copy of the driver image's inputs."""
    root = tmp_path / "src"
    for name in images.DRIVER_INPUTS:
        path = root / name
        if name in ("driver", "simdevice"):
            (path / "sub").mkdir(parents=True)
            (path / "sub" / "m.py").write_text(f"# {name}\n")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{name}\n")
    return root


def test_every_input_exists_in_the_repository() -> None:
    for name in images.DRIVER_INPUTS:
        assert (ROOT / name).exists(), name


def test_key_follows_the_inputs(tree: Path) -> None:
    key = images.driver_key(tree)
    assert len(key) == 16 and int(key, 16) >= 0
    assert images.driver_key(tree) == key
    (tree / "driver" / "sub" / "m.py").write_text("# changed\n")
    changed = images.driver_key(tree)
    assert changed != key
    (tree / "driver" / "sub" / "m.py").rename(tree / "driver" / "sub" / "n.py")
    assert images.driver_key(tree) not in (key, changed)  # a rename changes the context too


def test_key_ignores_what_the_build_does_not_see(tree: Path) -> None:
    key = images.driver_key(tree)
    cache = tree / "driver" / "sub" / "__pycache__"
    cache.mkdir()
    (cache / "m.cpython-311.pyc").write_bytes(b"x")
    gen = tree / "driver" / "kubeletplugin" / "protocol" / "gen"
    gen.mkdir(parents=True)
    (gen / "dra_v1_pb2.py").write_text("generated\n")
    (tree / "tests").mkdir()
    (tree / "tests" / "t.py").write_text("")
    assert images.driver_key(tree) == key


def test_recipe_of_the_base_is_an_input(tree: Path) -> None:
    key = images.driver_key(tree)
    (tree / "hack" / "images" / "python-base.sh").write_text("other packages\n")
    assert images.driver_key(tree) != key


def test_missing_driver_archive_names_the_image_and_the_fix(tree: Path, tmp_path: Path) -> None:
    key = images.driver_key(tree)
    with pytest.raises(ImageMissingError) as e:
        images.driver_image(tree, tmp_path)
    assert f"localhost/trainium-dra/driver:{key}" in str(e.value)
    assert "make image" in str(e.value)
    (tmp_path / f"driver-{key}.tar").write_bytes(b"")
    found = images.driver_image(tree, tmp_path)
    assert found == images.Image(
        f"localhost/trainium-dra/driver:{key}", tmp_path / f"driver-{key}.tar"
    )


def test_pause_image_is_the_archive_the_link_names(tmp_path: Path) -> None:
    with pytest.raises(ImageMissingError, match=r"pause.*make image"):
        images.pause_image(tmp_path)
    ref = "localhost/trainium-dra/pause:3.10.2"
    archive = tmp_path / "pause-3.10.2-0123456789abcdef.tar"
    layer = oci_archive.layer_tar([oci_archive.File("/pause", b"\x7fELF", 0o755)])
    oci_archive.write(archive, ref, io.BytesIO(layer), oci_archive.Config(entrypoint=["/pause"]))
    (tmp_path / "pause.tar").symlink_to(archive.name)
    assert images.pause_image(tmp_path) == images.Image(ref, archive)


def test_archives_live_in_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRAINIUM_DRA_CACHE", str(tmp_path))
    assert images.images_dir() == tmp_path / "images"


def test_key_of_the_repository_matches_a_copy_of_its_inputs(tmp_path: Path) -> None:
    """What build.sh names the image with is what the driver looks for."""
    for name in images.DRIVER_INPUTS:
        src, dest = ROOT / name, tmp_path / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "gen"))
        else:
            shutil.copy(src, dest)
    assert images.driver_key(tmp_path) == images.driver_key()
