"""What the pages name: make targets, repository paths, `trainium-dra`
commands and their flags, Python modules, links and their headings,
DeviceClasses, Kubernetes versions and lists of controllers.

Pure: markdown text in, references out. Only code (inline spans and fenced
blocks) and relative links count for targets, paths, commands and modules,
so prose like "make sure" is not a target. DeviceClass names, versions and
controller lists are read in prose too (rules at `kubernetes_versions`,
`device_classes` and `controller_lists`).
"""

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field

TOP_DIRS = (
    "driver",
    "simdevice",
    "localsim",
    "whatif",
    "testbed",
    "tests",
    "docs",
    "deploy",
    "charts",
    "hack",
    "benchmarks",
)
TOP_FILES = ("Makefile", "Dockerfile", "pyproject.toml", "uv.lock", "README.md")
PLACEHOLDER = re.compile(r"[{}<>*…]|\.\.\.|\$")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
ANY_FENCE = re.compile(r"^[ \t]*```[^\n]*\n.*?^[ \t]*```[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(rf"^(?:\./)?((?:{'|'.join(TOP_DIRS)})/[\w./-]*|{'|'.join(TOP_FILES)})$")
BARE_MODULE = re.compile(r"^[a-z_][a-z0-9_]*\.py$")
GENERATED = re.compile(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", re.DOTALL)


@dataclass(frozen=True)
class Refs:
    targets: set[str] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)  # bare `x.py`: some file of that name
    links: set[str] = field(default_factory=set)  # relative links, relative to the document
    commands: set[str] = field(default_factory=set)  # `trainium-dra` subcommands
    python_modules: set[str] = field(default_factory=set)  # `python -m` modules
    flags: set[tuple[str, str]] = field(default_factory=set)
    """(the words after `trainium-dra` up to the first option, a `--flag`):
    `trainium-dra whatif live --jobs 3` gives ("whatif live", "--jobs")."""
    anchors: set[tuple[str, str]] = field(default_factory=set)
    """(relative link path, "" for the document itself; its #fragment)."""
    device_classes: set[str] = field(default_factory=set)
    versions: set[str] = field(default_factory=set)  # Kubernetes versions, as written
    controllers: list[frozenset[str]] = field(default_factory=list)  # lists of controllers


def code_of(text: str) -> tuple[list[str], list[str]]:
    """(command lines of fenced blocks, inline code spans)."""
    lines = [line for block in FENCE.findall(text) for line in block.splitlines()]
    prose = FENCE.sub("", text)
    return lines, INLINE.findall(prose)


def words(snippet: str) -> list[str]:
    try:
        return shlex.split(snippet.split(" #", 1)[0], comments=False)
    except ValueError:
        return snippet.split()


def commands(snippet: str) -> Iterator[list[str]]:
    """Each simple command of a line, without `$ ` prompts and VAR=value prefixes."""
    for part in re.split(r"&&|\|\||[|;]|\$\(", snippet):
        argv = words(part.strip().removeprefix("$ "))
        while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):
            argv = argv[1:]
        if argv:
            yield argv


def cli_flags(args: list[str]) -> set[tuple[str, str]]:
    """The `--flags` of `trainium-dra ARGS...`, each with the words before the
    first option (the subcommand and its own subcommand or positional).
    `[--rack NAME]` is read as `--rack`, `--out=DIR` as `--out`."""
    args = [a.strip("[]") for a in args]
    first = next((i for i, a in enumerate(args) if a.startswith("-")), len(args))
    command = " ".join(args[:first])
    return {
        (command, a.split("=", 1)[0])
        for a in args[first:]
        if a.startswith("--") and len(a) > 2 and not PLACEHOLDER.search(a)
    }


def references(text: str) -> Refs:
    refs = Refs()
    lines, spans = code_of(text)
    for snippet in lines + spans:
        for argv in commands(snippet):
            program = argv[0].rsplit("/", 1)[-1]
            if program == "make":
                refs.targets.update(a for a in argv[1:] if not a.startswith("-") and "=" not in a)
            elif program == "trainium-dra" and len(argv) > 1 and not argv[1].startswith("-"):
                refs.commands.add(argv[1])
                refs.flags.update(cli_flags(argv[1:]))
            elif program.startswith("python") and argv[1:2] == ["-m"] and len(argv) > 2:
                refs.python_modules.add(argv[2])
        for word in words(snippet):
            token = word.split("::", 1)[0].rstrip(",.:;)")
            if PLACEHOLDER.search(token):
                continue
            if PATH.match(token):
                refs.paths.add(token.removeprefix("./"))
            elif BARE_MODULE.match(token):
                refs.modules.add(token)
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, fragment = target.partition("#")
        if path:
            refs.links.add(path)
        if fragment:
            refs.anchors.add((path, fragment))
    refs.device_classes.update(device_classes(text))
    refs.versions.update(kubernetes_versions(text))
    refs.controllers.extend(controller_lists(text))
    return refs


def make_targets(makefile: str) -> set[str]:
    """Targets a Makefile defines, explicit rules and .PHONY names."""
    found: set[str] = set()
    for line in makefile.splitlines():
        if line.startswith(".PHONY:"):
            found.update(line.split(":", 1)[1].split())
            continue
        match = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?!=)", line)
        if match and not line.startswith("\t"):
            found.update(match.group(1).split())
    return found


# --- headings ---------------------------------------------------------------


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text (a link's text, not its
    address), lowercased, punctuation dropped except `-` and `_`, each space a
    `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def heading_anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated one gets `-1`, `-2`, ... as on GitHub."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for match in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", ANY_FENCE.sub("", text), re.M):
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


# --- DeviceClasses ----------------------------------------------------------

DRIVERS = ("trainium.sim.dev", "neuron.aws.com")
"""The chart's driver names, one per profile (a test reads them from the chart)."""

DEVICE_CLASS = re.compile(
    rf"(?<![\w.-])([a-z][a-z0-9-]*)\.({'|'.join(re.escape(d) for d in DRIVERS)})(?![\w/-])"
)


def device_classes(text: str) -> set[str]:
    """Every `<kind>.<driver>` the text names, prose and code alike: the form of
    the chart's DeviceClasses beside the driver's own (`chip.trainium.sim.dev`,
    also inside `chip.trainium.sim.dev.deviceclass.resource.k8s.io/devices`).
    A name followed by `/` is a domain (`k8s.trainium.sim.dev/claim`), not a
    class; CRD names (`ultraservers.trainium.sim.dev`) have the same form, so
    the caller sets them apart."""
    return {m.group(0) for m in DEVICE_CLASS.finditer(text)}


def chart_device_classes(template: str, helpers: str) -> dict[str, set[str]]:
    """Profile -> the DeviceClasses the chart's deviceclasses.yaml makes, with
    `{{ $driver }}` as the profile's default driver name from _helpers.tpl
    (`ternary "<aws>" "<trainium>" (eq .Values.profile "aws")`)."""
    match = re.search(r'ternary "([^"]+)" "([^"]+)" \(eq \.Values\.profile "aws"\)', helpers)
    if match is None:
        raise ValueError("_helpers.tpl: no default driver name per profile")
    aws_only = re.search(
        r'\{\{-? if eq \.Values\.profile "aws" -?\}\}(.*?)\{\{-? else -?\}\}', template, re.S
    )
    if aws_only is None:
        raise ValueError("deviceclasses.yaml: no aws branch")
    branches = {
        "aws": (aws_only.group(1), match.group(1)),
        "trainium": (template[aws_only.end() :], match.group(2)),
    }
    names = re.compile(r"^kind: DeviceClass\nmetadata:\n  name: (.+?)[ \t]*$", re.M)
    return {
        profile: {n.replace("{{ $driver }}", driver) for n in names.findall(branch)}
        for profile, (branch, driver) in branches.items()
    }


# --- Kubernetes versions ----------------------------------------------------

MINOR = r"[2-9][0-9]"
VERSION = re.compile(
    rf"(?<![\w.])(?:v?1\.{MINOR}\.[0-9]+|v0\.{MINOR}\.[0-9]+|v?1\.{MINOR})(?![\w%\u00d7]|\.[0-9])"
)
GO = re.compile(r"\bgo\s*(?:>=|≥|version)?\s*$", re.I)
NOT_TESTED = "(not tested here)"
RENDERED = re.compile(r"rendered by `make pages`", re.I)


def kubernetes_versions(text: str) -> set[str]:
    """The Kubernetes versions a page names, in prose or code, as written.

    Read as one: `1.NN.P` and `v1.NN.P` (a release), `v0.NN.P` (the tag of a
    k8s.io staging module such as `k8s.io/kubelet`, which is release 1.NN.P),
    `v1.NN` and a bare `1.NN` (a minor), NN from 20 up: Kubernetes' own
    numbers since 2020, above those of the other programs the pages version
    (the CNI plugins v1.10.0, Kueue v0.17.0). Not read:

    - a number after `Go` (`Go >= 1.26`, `go 1.26.0`): Go's;
    - one followed by `(not tested here)`: the one bounded form for a page
      that must name another release;
    - a bare `1.NN` in figures (a ratio of 1.37 is no release): inside a
      generated block (`<!-- name:start -->` ... `<!-- name:end -->`) and on
      a page whose opening lines say it is rendered by `make pages`.
    """
    rendered = RENDERED.search("\n".join(text.splitlines()[:12])) is not None
    figures: list[tuple[int, int]] = [(0, len(text))] if rendered else []
    figures += [m.span() for m in GENERATED.finditer(text)]
    found: set[str] = set()
    for match in VERSION.finditer(text):
        version = match.group(0)
        if GO.search(text[max(0, match.start() - 16) : match.start()]):
            continue
        if text[match.end() :].lstrip().startswith(NOT_TESTED):
            continue
        bare = version.count(".") == 1 and not version.startswith("v")
        if bare and any(start <= match.start() < end for start, end in figures):
            continue
        found.add(version)
    return found


def release_forms(version: str) -> set[str]:
    """Every way a page may write release `v1.NN.P`: `1.NN`, `v1.NN`,
    `1.NN.P`, `v1.NN.P` and its staging modules' `v0.NN.P`."""
    match = re.fullmatch(r"v?1\.([0-9]+)\.([0-9]+)", version)
    if match is None:
        raise ValueError(f"{version!r}: not a Kubernetes release v1.NN.P")
    minor, patch = match.groups()
    return {
        f"1.{minor}",
        f"v1.{minor}",
        f"1.{minor}.{patch}",
        f"v1.{minor}.{patch}",
        f"v0.{minor}.{patch}",
    }


# --- controllers --------------------------------------------------------------

CONTROLLER_SPAN = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*-controller$")
PROSE_CONTROLLERS = re.compile(
    r"(?<![\w-])((?:[a-z][a-z0-9-]*, )+[a-z][a-z0-9-]*,? and [a-z][a-z0-9-]*) controllers\b"
)


def controller_lists(text: str) -> list[frozenset[str]]:
    """The lists of kube-controller-manager controllers a page gives, one per
    paragraph that names two or more, as `--controllers` names them: code
    spans such as `job-controller`, and prose such as "the job, namespace and
    serviceaccount controllers" (read as `job-controller`, ...)."""
    found: list[frozenset[str]] = []
    for paragraph in re.split(r"\n[ \t]*\n", FENCE.sub("", text)):
        flat = " ".join(paragraph.split())
        names = {span for span in INLINE.findall(flat) if CONTROLLER_SPAN.match(span)}
        for match in PROSE_CONTROLLERS.finditer(flat):
            names.update(f"{n}-controller" for n in re.split(r",? and |, ", match.group(1)))
        if len(names) >= 2:
            found.append(frozenset(names))
    return found
