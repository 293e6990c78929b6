"""What the README and docs/*.md name: make targets, repository paths,
`trainium-dra` commands and Python modules, read from their code.

Pure: markdown text in, references out. Only code (inline spans and fenced
blocks) and relative links count, so prose like "make sure" is not a target.
"""

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

TOP_DIRS = ("driver", "simdevice", "tests", "docs", "deploy", "charts", "hack", "benchmarks")
TOP_FILES = ("Makefile", "Dockerfile", "pyproject.toml", "uv.lock", "README.md")
PLACEHOLDER = re.compile(r"[{}<>*…]|\.\.\.|\$")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(rf"^(?:\./)?((?:{'|'.join(TOP_DIRS)})/[\w./-]*|{'|'.join(TOP_FILES)})$")
BARE_MODULE = re.compile(r"^[a-z_][a-z0-9_]*\.py$")


@dataclass(frozen=True)
class Refs:
    targets: set[str]
    paths: set[str]
    modules: set[str]  # bare `x.py` names: some file of that name must exist
    links: set[str]  # relative links, relative to the document's folder
    commands: set[str]  # `trainium-dra` subcommands
    python_modules: set[str]  # `python -m` modules


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


def references(text: str) -> Refs:
    refs = Refs(set(), set(), set(), set(), set(), set())
    lines, spans = code_of(text)
    for snippet in lines + spans:
        for argv in commands(snippet):
            program = argv[0].rsplit("/", 1)[-1]
            if program == "make":
                refs.targets.update(a for a in argv[1:] if not a.startswith("-") and "=" not in a)
            elif program == "trainium-dra" and len(argv) > 1 and not argv[1].startswith("-"):
                refs.commands.add(argv[1])
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
        if not re.match(r"^[a-z]+:|^#", target):
            refs.links.add(target.split("#", 1)[0])
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
