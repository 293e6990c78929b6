"""Every program the project runs comes from somewhere a fresh machine has:
built from a Go module under hack/, installed by `install_missing`, in the
virtualenv, or listed in docs/development.md as what the machine provides.
A program found on the developers' machines only (podman was, once) fails
here, not on a new machine."""

import re
import sys
from pathlib import Path

from tests.externalprograms import (
    code_names,
    go_tools,
    install_entries,
    install_packages,
    makefile_programs,
    makefile_recipes,
    python_programs,
    table_after,
    unaccounted,
)
from tests.shellreader import Script, programs, read_script

ROOT = Path(__file__).resolve().parent.parent
DEVELOPMENT = ROOT / "docs" / "development.md"
PROVIDED = "## What the machine provides"
INSTALLED = "### Debian packages"
PYTHON_DIRS = (
    "driver",
    "simdevice",
    "localsim",
    "whatif",
    "tests",
    "testbed",
    "benchmarks",
    "hack",
)


def shell_scripts() -> dict[str, Script]:
    paths = [*sorted((ROOT / "hack").rglob("*.sh")), ROOT / ".ci" / "run"]
    return {str(p.relative_to(ROOT)): read_script(p.read_text()) for p in paths}


def shell_runs(scripts: dict[str, Script]) -> dict[str, set[str]]:
    """File -> the programs it runs, for the Makefile and the shell scripts
    (with the host's PATH: the virtualenv is not on it)."""
    functions = {Path(path).name: script.functions for path, script in scripts.items()}
    prints = {Path(path).name: script.prints for path, script in scripts.items()}
    found = {
        path: programs(
            script, set().union(*(functions.get(name, set()) for name in script.sourced)), prints
        )
        for path, script in scripts.items()
    }
    found["Makefile"] = makefile_programs((ROOT / "Makefile").read_text())
    return found


def python_runs() -> dict[str, set[str]]:
    """File -> the programs it runs, for the Python (run from the virtualenv)."""
    paths = [p for directory in PYTHON_DIRS for p in sorted((ROOT / directory).rglob("*.py"))]
    return {str(p.relative_to(ROOT)): python_programs(p.read_text()) for p in paths}


def built() -> set[str]:
    """The `tool`s of hack/'s Go modules, and its own `main` packages by directory."""
    tools = set().union(*(go_tools(p.read_text()) for p in (ROOT / "hack").rglob("go.mod")))
    mains = {
        p.parent.name for p in (ROOT / "hack").rglob("main.go") if "package main" in p.read_text()
    }
    return tools | mains


def installed() -> set[str]:
    return set(install_entries(shell_scripts()))


def in_venv() -> set[str]:
    return {p.name for p in Path(sys.prefix, "bin").iterdir()}


def provided() -> set[str]:
    return set().union(
        *(code_names(row[0]) for row in table_after(DEVELOPMENT.read_text(), PROVIDED))
    )


def test_every_program_run_is_built_installed_or_provided() -> None:
    known = built() | installed() | provided()
    missing = unaccounted(shell_runs(shell_scripts()), known)
    for name, files in unaccounted(python_runs(), known | in_venv()).items():
        missing.setdefault(name, []).extend(files)
    assert missing == {}, (
        "add each to an install_missing call, or to the table under "
        f"'{PROVIDED}' in docs/development.md"
    )


def test_what_the_machine_provides_is_run_and_not_also_installed() -> None:
    run = set().union(*shell_runs(shell_scripts()).values(), *python_runs().values())
    assert provided() - run == set(), "listed in docs/development.md, run by nothing"
    assert provided() & (built() | installed()) == set(), "built or installed, not provided"


def test_the_documented_debian_packages_are_those_install_missing_installs() -> None:
    rows = table_after(DEVELOPMENT.read_text(), INSTALLED)
    assert set().union(*(code_names(row[0]) for row in rows)) == install_packages(shell_scripts())


def test_the_check_reports_podman_when_no_install_call_names_it() -> None:
    """What a fresh machine met: kind's engine run, installed nowhere."""
    scripts = shell_scripts()
    provider = (ROOT / "hack" / "kind" / "provider.sh").read_text()
    without = re.sub(r"(install_missing .*) podman\b", r"\1", provider)
    assert without != provider
    scripts["hack/kind/provider.sh"] = read_script(without)
    known = built() | set(install_entries(scripts)) | provided()
    assert "hack/kind/down.sh" in unaccounted(shell_runs(scripts), known)["podman"]


def test_the_check_reports_a_program_from_nowhere() -> None:
    script = read_script(
        "#!/usr/bin/env bash\n"
        "helper() { frobnicate --all; }\n"
        'out=$(grep -c x "$file") && helper\n'
        '"$tool" run; ./local.sh; echo "$out"\n'
    )
    found = {"tiny.sh": programs(script, set(), {})}
    assert unaccounted(found, built() | installed() | provided()) == {"frobnicate": ["tiny.sh"]}


def test_makefile_recipes_are_expanded_as_make_would() -> None:
    makefile = (
        "TOOL ?= kind\nENV = PATH=$$(cat build/dir):$$PATH \\\n  MODE=$(shell hack/mode.sh)\n"
        "all:\n\t@$(ENV) $(TOOL) create --image $(or $(IMAGE),$$(head -1 f))\n"
        "\t-$(MAKE) other\n\ttest -d x || mkdir x\n"
    )
    assert makefile_recipes(makefile) == [
        "PATH=$(cat build/dir):$PATH MODE=$(hack/mode.sh) kind create --image  $(head -1 f)",
        "make other",
        "test -d x || mkdir x",
    ]
    assert makefile_programs(makefile) == {"cat", "kind", "head", "make", "mkdir"}


def test_python_argv_literals_are_read_through_names_and_runner_functions() -> None:
    source = """
import shutil, subprocess

def run(argv):
    return subprocess.run(argv, check=True)

def run_all(*argv):
    return subprocess.run(argv)

def ip(*args):
    argv = ["ip", *args]
    return subprocess.run(argv)

subprocess.Popen(["containerd", "--config", path])
run(["mount", "--bind", a, b])
run_all("iptables-save")
subprocess.run([*kubectl, "apply"])
subprocess.run([str(binary), "version"])
subprocess.run(["/usr/sbin/thing"])
shutil.which("runc")
tools = {name: shutil.which(name) for name in ("conntrack", "ip")}
"""
    assert python_programs(source) == {
        "containerd",
        "mount",
        "iptables-save",
        "ip",
        "runc",
        "conntrack",
    }


def test_go_tools_are_named_as_go_build_names_them() -> None:
    gomod = "module m\n\ntool example.com/x/cmd/one\n\n"
    gomod += "tool (\n\texample.com/two\n\texample.com/three/v2\n)\n"
    assert go_tools(gomod) == {"one", "two", "three"}
