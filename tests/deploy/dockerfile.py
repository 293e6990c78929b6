"""A small reader of the Dockerfile and .dockerignore (Docker cannot run here),
so tests can check what a build would copy, run and start."""

import re
import shlex
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str

    def words(self) -> list[str]:
        return shlex.split(self.args)


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


@dataclass(frozen=True)
class Dockerfile:
    args: dict[str, str]  # ARGs before the first FROM, with their defaults
    stages: list[Stage]


def parse(text: str) -> Dockerfile:
    """Instructions with continuation lines joined; comments and blank lines dropped."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    assert not pending, "Dockerfile ends inside a continued line"
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in lines:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = rest.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        elif not stages:
            assert keyword == "ARG", f"{keyword} before the first FROM"
            key, _, default = rest.partition("=")
            args[key] = default
        else:
            stages[-1].instructions.append(Instruction(keyword, rest.strip()))
    return Dockerfile(args, stages)


def _regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + "$")


def ignored(path: str, dockerignore: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    result = False
    for raw in dockerignore.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = _regex(line.lstrip("!").strip("/"))
        if any(pattern.match(c) for c in candidates):
            result = not negate
    return result
