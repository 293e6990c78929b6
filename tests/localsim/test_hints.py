"""The commands `trainium-dra up` and `make demo` print for the user run as
printed in a newcomer's shell: one whose PATH lacks the virtualenv, from
another directory, with a home whose path has a space in it."""

import subprocess
import sys
from pathlib import Path

import pytest

from localsim.commands.flags import parse_up
from localsim.commands.hints import EXAMPLES, example
from localsim.commands.up import usage_lines

NEWCOMER_PATH = "/usr/bin:/bin"


def commands(lines: list[str]) -> list[str]:
    """The shell commands of a block: its indented lines and what follows
    "Stop it with:", up to the alternative in parentheses."""
    found = [line.strip() for line in lines if line.startswith("  ")]
    found += [
        line.removeprefix("Stop it with:").split("(or:")[0].strip()
        for line in lines
        if line.startswith("Stop it with:")
    ]
    return found


def in_newcomer_shell(script: str, cwd: Path) -> str:
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env={"PATH": NEWCOMER_PATH, "HOME": str(cwd)},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_every_command_printed_is_found_as_printed(tmp_path: Path) -> None:
    home = tmp_path / "a home"
    elsewhere = home / "elsewhere"
    elsewhere.mkdir(parents=True)
    flags = parse_up([f"--state-dir={home / 'state'}"])
    lines = usage_lines(flags.paths, flags.spec, ["kubectl get resourceslices"])
    block = commands(lines)
    exports = [c for c in block if c.startswith("export ")]
    programs = sorted({c.split()[0] for c in block} - {"export"})
    assert programs == ["kubectl", "trainium-dra"]
    lookups = [f'command -v {p} || echo "{p}: not found"' for p in programs]
    script = "\n".join([*exports, *lookups, 'echo "$KUBECONFIG"'])
    out = in_newcomer_shell(script, elsewhere).splitlines()
    venv = Path(sys.executable).parent
    assert out == [str(venv / "kubectl"), str(venv / "trainium-dra"), str(flags.paths.kubeconfig)]


def test_without_the_export_a_newcomer_finds_neither_command(tmp_path: Path) -> None:
    """What the export line is for: the virtualenv is not on such a PATH."""
    out = in_newcomer_shell("command -v trainium-dra kubectl || true", tmp_path)
    venv = str(Path(sys.executable).parent)
    assert venv not in out


def test_example_folders_are_given_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = EXAMPLES / "single-core"
    printed = in_newcomer_shell(f"ls -d {example(folder)}", tmp_path)
    assert (tmp_path / printed.strip()).resolve() == folder
