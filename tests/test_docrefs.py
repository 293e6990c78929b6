"""Every make target, path, command, flag, link, DeviceClass, Kubernetes
version and list of controllers the pages (README.md, docs/*.md and the
examples' READMEs) name exists in the code. The lists are read from the files
at test time, so new pages, targets, flags and releases are checked without
editing this test."""

import argparse
import importlib
import importlib.util
import re
import subprocess
from pathlib import Path
from typing import Any, NoReturn
from unittest import mock

import pytest

from driver.cli import COMMANDS
from localsim.controlplane.plane import CONTROLLERS, REAL_NODE_CONTROLLERS
from tests.docrefs import (
    DRIVERS,
    chart_device_classes,
    cli_flags,
    controller_lists,
    device_classes,
    heading_anchors,
    kubernetes_versions,
    make_targets,
    references,
    release_forms,
    slug,
)
from tests.externalprograms import code_names, table_after
from tests.test_boundaries import ALLOWED

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted(
    [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        ROOT / "deploy/examples/README.md",
        *(ROOT / "deploy/examples").glob("*/README.md"),
    ]
)
OUTSIDE_REFERENCES = re.compile(r"DESIGN\.md|issue [0-9]|[Ii]ssue #")
CHART = ROOT / "charts/trainium-dra"
QUICKSTART_UP_FLAGS = 'Flags of `trainium-dra up` (also `make demo DEMO_ARGS="..."`):'


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


# --- flags ----------------------------------------------------------------------


class _ParseStartedError(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


def _stop(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
    raise _ParseStartedError(self)


def command_parser(command: str) -> argparse.ArgumentParser:
    """The parser `trainium-dra <command>` builds, caught when it starts to
    parse: each command's `main` parses its arguments before anything else."""
    module = importlib.import_module(COMMANDS[command][0])
    with (
        mock.patch.object(argparse.ArgumentParser, "parse_args", _stop),
        mock.patch.object(argparse.ArgumentParser, "parse_known_args", _stop),
    ):
        try:
            module.main([])
        except _ParseStartedError as started:
            return started.parser
    raise AssertionError(f"trainium-dra {command}: main() parsed no arguments")


def options(parser: argparse.ArgumentParser, words: list[str]) -> set[str]:
    """The option strings of the parser that `words` (subcommands and
    positionals, as in `whatif live` or `controlplane up`) lead to."""
    for word in words:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) and word in action.choices:
                parser = action.choices[word]
                break
    return {option for action in parser._actions for option in action.option_strings}


@pytest.fixture(scope="module")
def parsers() -> dict[str, argparse.ArgumentParser]:
    return {command: command_parser(command) for command in COMMANDS}


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_named_flags_exist(doc: Path, parsers: dict[str, argparse.ArgumentParser]) -> None:
    unknown: set[str] = set()
    for command, flag in references(doc.read_text()).flags:
        first, *rest = command.split()
        if first in parsers and flag not in options(parsers[first], rest):
            unknown.add(f"trainium-dra {command} {flag}")
    assert unknown == set()


def test_quickstart_lists_every_flag_of_up(parsers: dict[str, argparse.ArgumentParser]) -> None:
    rows = table_after((ROOT / "docs/quickstart.md").read_text(), QUICKSTART_UP_FLAGS)
    listed = {re.findall(r"`(--[\w-]+)", row[0])[0] for row in rows}
    assert listed == options(parsers["up"], []) - {"-h", "--help"}


def test_the_parser_of_a_command_is_caught_before_it_runs(
    parsers: dict[str, argparse.ArgumentParser],
) -> None:
    assert {"--racks", "--with-kueue", "--state-dir"} <= options(parsers["up"], [])
    assert "--jobs" in options(parsers["whatif"], ["live"])
    assert "--racks" not in options(parsers["whatif"], ["stats"])
    assert "--state-dir" in options(parsers["controlplane"], ["up"])


# --- links to headings ----------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_linked_headings_exist(doc: Path) -> None:
    missing: set[str] = set()
    for path, fragment in references(doc.read_text()).anchors:
        target = doc.parent / path if path else doc
        if (
            target.suffix == ".md"
            and target.is_file()
            and fragment not in heading_anchors(target.read_text())
        ):
            missing.add(f"{path}#{fragment}")
    assert missing == set()


# --- DeviceClasses --------------------------------------------------------------


def chart_classes() -> set[str]:
    per_profile = chart_device_classes(
        (CHART / "templates/deviceclasses.yaml").read_text(),
        (CHART / "templates/_helpers.tpl").read_text(),
    )
    return set[str]().union(*per_profile.values())


def crd_names() -> set[str]:
    return {path.name.removesuffix(".yaml") for path in (CHART / "crds").glob("*.yaml")}


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_named_device_classes_exist(doc: Path) -> None:
    named = references(doc.read_text()).device_classes
    assert named - chart_classes() - crd_names() == set()


def test_the_driver_names_are_the_charts() -> None:
    helpers = (CHART / "templates/_helpers.tpl").read_text()
    per_profile = chart_device_classes(
        (CHART / "templates/deviceclasses.yaml").read_text(), helpers
    )
    assert set(DRIVERS) <= set[str]().union(*per_profile.values())
    assert "chip.trainium.sim.dev" in per_profile["trainium"]
    assert "chip.neuron.aws.com" not in chart_classes()


def test_examples_use_only_the_charts_device_classes() -> None:
    used = {
        name
        for path in (ROOT / "deploy").rglob("*.yaml")
        for name in re.findall(r"deviceClassName: (\S+)", path.read_text())
    }
    assert used and used - chart_classes() == set()


# --- Kubernetes versions --------------------------------------------------------


def releases_built() -> set[str]:
    """The default release (hack/k8s/go.mod) and the previous one (Makefile)."""
    pinned = re.search(
        r"^require k8s\.io/kubernetes (v\S+)$", (ROOT / "hack/k8s/go.mod").read_text(), re.M
    )
    previous = re.search(r"^K8S_PREVIOUS := (v\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned and previous
    return {pinned[1], previous[1]}


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_named_kubernetes_versions_are_tested(doc: Path) -> None:
    allowed = set[str]().union(*(release_forms(v) for v in releases_built()))
    assert references(doc.read_text()).versions - allowed == set()


def test_the_tested_releases_are_read_from_the_build() -> None:
    releases = releases_built()
    assert len(releases) == 2
    assert all(re.fullmatch(r"v1\.[0-9]+\.[0-9]+", v) for v in releases)


# --- controllers ----------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_listed_controllers_are_those_the_local_plane_runs(doc: Path) -> None:
    local, real = frozenset(CONTROLLERS), frozenset(REAL_NODE_CONTROLLERS)
    for listed in references(doc.read_text()).controllers:
        assert listed - real == set(), "not run by the local control plane"
        nearest = min((local, real - local, real), key=lambda known: len(known ^ listed))
        assert listed == nearest, (
            "a list names every controller of the stand-in's plane, of the real nodes' "
            f"or what real nodes add; missing: {sorted(nearest - listed)}"
        )


# --- the reader -----------------------------------------------------------------


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


def test_the_reader_finds_flags_with_their_subcommand() -> None:
    text = (
        "`trainium-dra top [--rack rack-b] [--interval 1]` and\n"
        "```sh\ntrainium-dra whatif live --jobs 3 --out=x && trainium-dra up --help\n"
        "trainium-dra controlplane up --state-dir DIR --flag-<name>\n```\n"
    )
    assert references(text).flags == {
        ("top", "--rack"),
        ("top", "--interval"),
        ("whatif live", "--jobs"),
        ("whatif live", "--out"),
        ("up", "--help"),
        ("controlplane up", "--state-dir"),
    }
    assert cli_flags(["down"]) == set()


def test_the_reader_finds_fragments_and_headings() -> None:
    text = "[a](#one-two) [b](other.md#x_y) [c](https://x.io/#z) [d](other.md)\n"
    refs = references(text)
    assert refs.anchors == {("", "one-two"), ("other.md", "x_y")}
    assert refs.links == {"other.md"}
    page = (
        "# Top\n## Pool layouts: `rack`, `node` and `server`\n```sh\n# not a heading\n```\n## Top\n"
    )
    assert heading_anchors(page) == {"top", "pool-layouts-rack-node-and-server", "top-1"}
    assert (
        slug("Health: node reports → device [taints](x.md)") == "health-node-reports--device-taints"
    )
    assert slug("A_b (c)!") == "a_b-c"


def test_the_reader_finds_device_classes() -> None:
    text = (
        "Classes `chip.trainium.sim.dev`, neuroncore.neuron.aws.com and\n"
        "`core.trainium.sim.dev.deviceclass.resource.k8s.io/devices`; not the domain\n"
        "`k8s.trainium.sim.dev/claim`, the driver `trainium.sim.dev`, `<kind>.trainium.sim.dev`\n"
        "or gpu.example.com.\n"
    )
    assert device_classes(text) == {
        "chip.trainium.sim.dev",
        "neuroncore.neuron.aws.com",
        "core.trainium.sim.dev",
    }


def test_chart_device_classes_are_read_per_profile() -> None:
    helpers = (
        '{{- .Values.driverName | default (ternary "a.io" "b.io" (eq .Values.profile "aws")) -}}'
    )
    template = (
        '{{- if eq .Values.profile "aws" }}\nkind: DeviceClass\nmetadata:\n  name: {{ $driver }}\n'
        "{{- else }}\nkind: DeviceClass\nmetadata:\n  name: chip.{{ $driver }}\n"
        "---\nkind: Other\nmetadata:\n  name: not-a-class\n{{- end }}\n"
    )
    assert chart_device_classes(template, helpers) == {"aws": {"a.io"}, "trainium": {"chip.b.io"}}


def test_the_reader_finds_kubernetes_versions() -> None:
    text = (
        "Kubernetes 1.36 and `v1.37.2`; `k8s.io/kubelet@v0.36.3`; K8S_VERSION=v1.35.0;\n"
        "the `k8s-1.34/` folder; Kubernetes v1.33. Not: Go >= 1.26, `go 1.26.0`, a 1.38x\n"
        "ratio, 12%, CNI v1.10.0, Kueue v0.17.0, Prometheus v0.316.0, 172.30.99.1,\n"
        "Python 3.11.7, 1.32 (not tested here).\n"
    )
    assert kubernetes_versions(text) == {"1.36", "v1.37.2", "v0.36.3", "v1.35.0", "1.34", "v1.33"}
    generated = "<!-- x:start -->\nratio 1.29, built on v1.31.0\n<!-- x:end -->\n"
    assert kubernetes_versions(generated) == {"v1.31.0"}
    rendered = "# Page\n\nRendered by `make pages` from results.\n\nratio 1.29 on v1.31.0\n"
    assert kubernetes_versions(rendered) == {"v1.31.0"}
    assert release_forms("v1.37.2") == {"1.37", "v1.37", "1.37.2", "v1.37.2", "v0.37.2"}


def test_the_reader_finds_lists_of_controllers() -> None:
    text = (
        "The plane runs `job-controller` and\n`namespace-controller`, not\n"
        "`kube-controller-manager` or `<release>-trainium-dra-controller`.\n\n"
        "Alone: `resourcequota-controller`.\n\n"
        "It runs the resourceclaim, device-taint-eviction and job controllers only;\n"
        "the scheduler and the controllers.\n"
    )
    assert controller_lists(text) == [
        frozenset({"job-controller", "namespace-controller"}),
        frozenset(
            {"resourceclaim-controller", "device-taint-eviction-controller", "job-controller"}
        ),
    ]


# --- the architecture page's import table ---------------------------------------


def module_of(span: str) -> str:
    """`driver/kubeapi/` -> `driver.kubeapi`; `driver/mainwait.py` -> `driver.mainwait`."""
    return span.removesuffix("/").removesuffix(".py").replace("/", ".")


def test_the_architecture_page_holds_the_boundaries_table() -> None:
    """docs/architecture.md's "Who owns what": each row's imports cell names
    (as code spans) exactly what tests/test_boundaries.py's ALLOWED lets the
    row's packages import; a cell without any names nothing."""
    rows = table_after((ROOT / "docs/architecture.md").read_text(), "## Who owns what")
    documented = {
        module_of(package): {module_of(name) for name in code_names(imports_cell)}
        for packages, _, imports_cell in rows
        for package in code_names(packages)
        if module_of(package) in ALLOWED
    }
    assert documented == {package: set(allowed) for package, allowed in ALLOWED.items()}


INDEX = ROOT / "docs/README.md"


def test_the_docs_index_lists_every_page_once() -> None:
    linked = re.findall(r"\]\(([a-z-]+\.md)\)", INDEX.read_text())
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p != INDEX)
    assert sorted(linked) == pages, "docs/README.md must link every page of docs/ exactly once"


def glossary_words(text: str) -> list[str]:
    """The words a glossary table explains: its first column, split at commas."""
    rows = text[text.index("## Glossary") :].splitlines()
    return [
        w.strip()
        for row in rows
        if row.startswith("| ") and not row.startswith("| word")
        for w in row.split("|")[1].split(",")
    ]


def test_every_glossary_word_is_used_on_another_page() -> None:
    others = " ".join(d.read_text() for d in DOCS if d != INDEX)
    words = glossary_words(INDEX.read_text())
    assert len(words) >= 10
    unused = [w for w in words if w not in others]
    assert not unused, f"the glossary explains words no page uses: {unused}"
