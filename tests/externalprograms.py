"""Which external programs the project runs, read from its source, and where
each one comes from: built from a Go module under hack/, installed by a call
to `install_missing` (hack/lib/debian-packages.sh), installed into the
virtualenv, or a prerequisite listed in docs/development.md.

Pure: file texts in, names out. Shell is read by tests/shellreader.py; the
Makefile's recipes are expanded as make would before that; Python is read
for argv literals passed to subprocess (directly, through a local name, or
through a function that passes its argument on) and for `shutil.which`.
"""

import ast
import re
from collections.abc import Mapping

from tests.shellreader import Script, programs, read_script

SUBPROCESS = frozenset({"run", "Popen", "call", "check_call", "check_output"})
MAKE_VARIABLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(\?=|::=|:=|\+=|=)\s*(.*)$")
MAKE_BUILTINS = {"MAKE": "make", "CURDIR": "."}
VARARGS = -1
"""A runner whose `*args` are the argv."""


def _closing(text: str, at: int) -> int:
    """Index of the bracket that closes the one at `at`."""
    opening = text[at]
    closing = ")" if opening == "(" else "}"
    depth = 0
    for i in range(at, len(text)):
        depth += (text[i] == opening) - (text[i] == closing)
        if depth == 0:
            return i
    raise ValueError(f"unclosed {opening} in {text!r}")


def _split_commas(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c in "({") - (c in ")}")
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


def make_expand(text: str, variables: Mapping[str, str]) -> str:
    """`text` as make hands it to the shell: variables expanded, `$(shell x)`
    as the command substitution `$(x)`, other functions as their arguments."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
            continue
        after = text[i + 1]
        if after == "$":
            out.append("$")
            i += 2
        elif after in "({":
            end = _closing(text, i + 1)
            body = text[i + 2 : end]
            function, _, args = body.partition(" ")
            if function == "shell":
                out.append(f"$({make_expand(args, variables)})")
            elif args:
                out.append(" ".join(make_expand(a, variables) for a in _split_commas(args)))
            else:
                out.append(make_expand(variables.get(body, MAKE_BUILTINS.get(body, "")), variables))
            i = end + 1
        else:  # $@, $<, $X
            out.append(
                make_expand(variables.get(after, ""), variables) if after.isalpha() else "target"
            )
            i += 2
    return "".join(out)


def makefile_recipes(makefile: str) -> list[str]:
    """Each recipe line of a Makefile, expanded, without its `@`/`-`/`+` prefix."""
    lines = re.sub(r"[ \t]*\\\n\s*", " ", makefile).splitlines()
    variables: dict[str, str] = {}
    for line in lines:
        if match := MAKE_VARIABLE.match(line):
            name, op, value = match.groups()
            if op == "+=":
                variables[name] = f"{variables.get(name, '')} {value}"
            elif op != "?=" or name not in variables:
                variables[name] = value
    return [make_expand(line.lstrip("\t@-+"), variables) for line in lines if line.startswith("\t")]


def makefile_programs(makefile: str) -> set[str]:
    return set().union(
        *(programs(read_script(recipe), set(), {}) for recipe in makefile_recipes(makefile))
    )


def _is_subprocess(call: ast.Call) -> bool:
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "subprocess"
        and func.attr in SUBPROCESS
    )


def _head(node: ast.expr) -> str | None:
    """The program of an argv literal: its first element, a string."""
    if isinstance(node, ast.List | ast.Tuple) and node.elts:
        first = node.elts[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


def python_programs(source: str) -> set[str]:
    """Programs a Python module runs by name."""
    tree = ast.parse(source)
    argv_names: dict[str, list[ast.expr]] = {}  # name = [ ... ] anywhere in the module
    loop_values: dict[str, list[str]] = {}  # for name in ("a", "b")
    runners: dict[str, int] = {}  # function -> which parameter is the argv
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            argv_names.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.For | ast.comprehension) and isinstance(node.target, ast.Name):
            if isinstance(node.iter, ast.Tuple | ast.List):
                values = [e.value for e in node.iter.elts if isinstance(e, ast.Constant)]
                loop_values.setdefault(node.target.id, []).extend(str(v) for v in values)
        elif isinstance(node, ast.FunctionDef):
            params = [a.arg for a in node.args.args]
            vararg = node.args.vararg.arg if node.args.vararg else None
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call) and _is_subprocess(inner) and inner.args:
                    first = inner.args[0]
                    if isinstance(first, ast.Name) and first.id in params:
                        runners[node.name] = params.index(first.id)
                    elif isinstance(first, ast.Name) and first.id == vararg:
                        runners[node.name] = VARARGS
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and (func.value.id, func.attr) == ("shutil", "which")
            and node.args
        ):
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.add(arg.value)
            elif isinstance(arg, ast.Name):
                found.update(loop_values.get(arg.id, []))
            continue
        position = 0 if _is_subprocess(node) else runners.get(getattr(func, "id", ""))
        if position is None or len(node.args) <= max(position, 0):
            continue
        argv = node.args[position] if position != VARARGS else ast.Tuple(elts=node.args)
        candidates = argv_names.get(argv.id, []) if isinstance(argv, ast.Name) else [argv]
        found.update(head for head in map(_head, candidates) if head)
    return {name for name in found if "/" not in name}


def go_tools(gomod: str) -> set[str]:
    """Commands a go.mod declares as `tool`s, by the name `go build` gives them."""
    paths = re.findall(r"^tool\s+([^\s(]\S*)\s*$", gomod, re.MULTILINE)
    for block in re.findall(r"^tool\s*\((.*?)^\)", gomod, re.MULTILINE | re.DOTALL):
        paths += block.split()
    names = set()
    for path in paths:
        parts = path.split("/")
        names.add(parts[-2] if re.fullmatch(r"v[0-9]+", parts[-1]) else parts[-1])
    return names


def install_entries(scripts: Mapping[str, Script]) -> dict[str, str]:
    """Program -> Debian package, from every `install_missing PURPOSE
    COMMAND[:PACKAGE]...` call (entries that are files, `/...`, are left out)."""
    found: dict[str, str] = {}
    for script in scripts.values():
        for name, args in script.calls:
            if name != "install_missing":
                continue
            for word in args[1:]:
                entry = word.text.strip("\"'")
                command, _, package = entry.rpartition(":") if ":" in entry else (entry, "", entry)
                if not command.startswith("/") and "$" not in command:
                    found[command] = package
    return found


def install_packages(scripts: Mapping[str, Script]) -> set[str]:
    """Every Debian package an `install_missing` call names, files' packages too."""
    return {
        word.text.strip("\"'").rpartition(":")[2]
        for script in scripts.values()
        for name, args in script.calls
        if name == "install_missing"
        for word in args[1:]
    }


def table_after(markdown: str, heading: str) -> list[list[str]]:
    """The rows (cells) of the first table after the line `heading`, header
    and rule left out."""
    lines = markdown.splitlines()
    start = lines.index(heading)
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]


def code_names(cell: str) -> set[str]:
    """The `code` spans of a table cell."""
    return set(re.findall(r"`([^`]+)`", cell))


def unaccounted(runs: Mapping[str, set[str]], known: set[str]) -> dict[str, list[str]]:
    """Program -> the files that run it, for every program not in `known`."""
    found: dict[str, list[str]] = {}
    for path, names in sorted(runs.items()):
        for name in sorted(names - known):
            found.setdefault(name, []).append(path)
    return found
