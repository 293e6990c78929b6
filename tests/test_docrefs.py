"""Every make target, path, command and module the README and docs/*.md name
exists. The lists are read from the files at test time, so new docs and new
targets are checked without editing this test."""

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

from driver.cli import COMMANDS
from tests.docrefs import make_targets, references

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
OUTSIDE_REFERENCES = re.compile(r"DESIGN\.md|issue [0-9]|[Ii]ssue #")


def tracked_names() -> set[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {Path(line).name for line in out.splitlines()}


@pytest.fixture(scope="module")
def file_names() -> set[str]:
    return tracked_names()


def doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_named_make_targets_exist(doc: Path) -> None:
    defined = make_targets((ROOT / "Makefile").read_text())
    assert references(doc.read_text()).targets - defined == set()


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_named_paths_exist(doc: Path, file_names: set[str]) -> None:
    refs = references(doc.read_text())
    missing = {p for p in refs.paths if not (ROOT / p).exists()}
    missing |= {link for link in refs.links if link and not (doc.parent / link).exists()}
    missing |= refs.modules - file_names
    assert missing == set()


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_named_commands_exist(doc: Path) -> None:
    refs = references(doc.read_text())
    assert refs.commands - set(COMMANDS) == set()
    assert {m for m in refs.python_modules if importlib.util.find_spec(m) is None} == set()


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_docs_cite_only_what_the_repository_holds(doc: Path) -> None:
    assert OUTSIDE_REFERENCES.findall(doc.read_text()) == []


def test_the_reader_finds_what_it_should() -> None:
    text = (
        "Run `make unit` or `trainium-dra up --racks 2`; see `driver/cli.py::main` and\n"
        "[dev](docs/development.md#setup). Make sure `flags.py` exists.\n"
        "```sh\nKUBECONFIG=x .venv/bin/trainium-dra status && make demo DEMO_ARGS=1\n"
        "python -m benchmarks.sim  # `make not-a-target` in a comment\n```\n"
    )
    refs = references(text)
    assert refs.targets == {"unit", "demo"}
    assert refs.commands == {"up", "status"}
    assert refs.paths == {"driver/cli.py"}
    assert refs.links == {"docs/development.md"}
    assert refs.modules == {"flags.py"}
    assert refs.python_modules == {"benchmarks.sim"}


def test_make_targets_are_read_from_rules_and_phony() -> None:
    makefile = ".PHONY: a b\nVAR := 1\nc d: a\n\techo x: y\n$(VENV)/.synced: x\n"
    assert make_targets(makefile) == {"a", "b", "c", "d"}
