"""Reads bash as far as hack/ writes it, to say which programs a script runs.

Pure: script text in, commands out. It knows quoting, command and process
substitution, `${name:-default}`, redirections, array assignments, function
definitions, `trap` handlers and the wrappers `exec`, `command` and `xargs`.
A command named by a variable is followed one step: `engine=$(x/pick.sh)`
then `"$engine" ps` runs whatever pick.sh echoes. What it cannot read
(backticks, here-documents, `case`) it refuses loudly rather than misread.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_BUILTIN_NAMES = """. : [ alias bg bind break builtin caller cd command compgen complete compopt
continue declare dirs disown echo enable eval exec exit export false fc fg getopts hash help
history jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly return
set shift shopt source suspend test times trap true type typeset ulimit umask unalias unset wait"""
BUILTINS = frozenset(_BUILTIN_NAMES.split())
_KEYWORD_NAMES = "if then else elif fi do done while until ! { } time"
KEYWORDS = frozenset(_KEYWORD_NAMES.split())
LOOPS = frozenset({"for", "select"})
"""Their words name a variable and a list, not a command."""
WRAPPERS = frozenset({"exec", "command", "xargs"})
"""They run the command in their arguments (after their options)."""
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^]]*\])?\+?=")
ARRAY_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
REDIRECT = re.compile(r"\d*(&>>|&>|>>|>&|<&|<<<|<>|>\||>|<)(?!\()")
BRACED_NAME = re.compile(r"[#!]?([A-Za-z_]\w*|\d+|[@*#?$!-])(\[[^]]*\])?")
BRACED_OP = re.compile(r":?[-=+?]|##?|%%?|//?|\^\^?|,,?|:")
NAME = re.compile(r"[A-Za-z_]\w*|\d|[@*#?$!-]")
WORD_END = " \t\n;&|()<>"


class UnreadableShellError(ValueError):
    """The script uses syntax this reader does not know."""


@dataclass
class Word:
    text: str  # as written, quotes included
    literal: str | None  # its value when nothing in it expands (or `${x:-value}` alone)
    variable: str | None = None  # the name, when the word is just `$name` or `${name}`
    inner: list["Command"] = field(default_factory=list)  # of its substitutions
    items: list["Word"] = field(default_factory=list)  # of an array assignment `a=(...)`


@dataclass
class Command:
    words: list[Word] = field(default_factory=list)
    redirects: list[Word] = field(default_factory=list)  # targets of < > etc.


@dataclass(frozen=True)
class Expansion:
    default: str | None = None  # the literal default of `${name:-default}`
    name: str | None = None  # set for a plain `$name` or `${name}`


@dataclass(frozen=True)
class Script:
    calls: list[
        tuple[str, list[Word]]
    ]  # each command run: its name (`$x` for a variable), arguments
    functions: set[str]
    sourced: set[str]  # base names of the files it sources
    assigned: dict[str, set[str]]  # variable -> base names of the scripts whose output it holds
    prints: set[str]  # the words it echoes on its own (a script that names a program)


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.functions: set[str] = set()

    def peek(self, n: int = 0) -> str:
        at = self.pos + n
        return self.text[at] if at < len(self.text) else ""

    def fail(self, what: str) -> UnreadableShellError:
        line = self.text.count("\n", 0, self.pos) + 1
        return UnreadableShellError(f"line {line}: {what} is not read by tests/shellreader.py")

    def commands(self, closing: str | None = None) -> list[Command]:
        """Commands up to the `)` that closes a substitution, or to the end."""
        done: list[Command] = []
        current = Command()
        depth = 0  # of subshells `( ... )` inside
        target = False  # the next word is a redirection's target

        def finish() -> None:
            nonlocal current
            if current.words or current.redirects:
                done.append(current)
            current = Command()

        while self.pos < len(self.text):
            c = self.peek()
            if c == ")" and depth == 0 and closing == ")":
                self.pos += 1
                finish()
                return done
            if c in " \t":
                self.pos += 1
            elif self.text.startswith("\\\n", self.pos):
                self.pos += 2
            elif c == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            elif (
                c == "("
                and len(current.words) == 1
                and self.text[self.pos + 1 :].lstrip(" ").startswith(")")
            ):
                self.functions.add(current.words[0].text)
                self.pos = self.text.index(")", self.pos) + 1
                current = Command()
            elif c in "()":
                depth += 1 if c == "(" else -1
                self.pos += 1
                finish()
            elif self.text.startswith("<<", self.pos) and not self.text.startswith("<<<", self.pos):
                raise self.fail("a here-document")
            elif match := REDIRECT.match(self.text, self.pos):
                self.pos = match.end()
                target = True
            elif c in "\n;&|":
                self.pos += 1
                finish()
            else:
                word = self.word(WORD_END)
                (current.redirects if target else current.words).append(word)
                target = False
        if closing:
            raise self.fail(f"an unclosed {closing}")
        finish()
        return done

    def word(self, stops: str) -> Word:
        start = self.pos
        value: list[str] = []
        literal = True
        expansions: list[Expansion] = []
        inner: list[Command] = []
        items: list[Word] = []
        while self.pos < len(self.text):
            c = self.peek()
            if c in "<>" and self.peek(1) == "(":
                self.pos += 2
                inner += self.commands(")")
                literal = False
            elif (
                c == "("
                and stops == WORD_END
                and ARRAY_START.fullmatch(self.text[start : self.pos])
            ):
                self.pos += 1
                items = self.array_items()
                literal = False
            elif c in stops:
                break
            elif c == "`":
                raise self.fail("a backtick substitution (write $(...))")
            elif c == "\\":
                if self.peek(1) != "\n":
                    value.append(self.peek(1))
                self.pos += 2
            elif c == "'":
                end = self.text.index("'", self.pos + 1)
                value.append(self.text[self.pos + 1 : end])
                self.pos = end + 1
            elif c == '"':
                self.pos += 1
                literal &= self.double_quoted(value, inner, expansions)
                self.pos += 1
            elif c == "$" and self.peek(1) not in ("", " ", "\n", '"'):
                expansions.append(self.expansion(inner))
                literal = False
            else:
                value.append(c)
                self.pos += 1
        text = self.text[start : self.pos]
        if not literal and not value and len(expansions) == 1:
            alone = expansions[0]  # `"${KIND:-kind}"` is its default; `"$x"` names x
            return Word(text, alone.default, alone.name, inner, items)
        return Word(text, "".join(value) if literal else None, None, inner, items)

    def double_quoted(
        self, value: list[str], inner: list[Command], expansions: list[Expansion]
    ) -> bool:
        literal = True
        while self.peek() != '"':
            c = self.peek()
            if not c:
                raise self.fail("an unclosed double quote")
            if c == "\\" and self.peek(1) in '$`"\\\n':
                if self.peek(1) != "\n":
                    value.append(self.peek(1))
                self.pos += 2
            elif c == "`":
                raise self.fail("a backtick substitution (write $(...))")
            elif c == "$" and self.peek(1) not in ("", " ", '"'):
                expansions.append(self.expansion(inner))
                literal = False
            else:
                value.append(c)
                self.pos += 1
        return literal

    def expansion(self, inner: list[Command]) -> Expansion:
        """Past one `$...`; its substitutions' commands go to `inner`."""
        self.pos += 1
        if self.text.startswith("((", self.pos):
            depth = 0
            while True:
                depth += {"(": 1, ")": -1}.get(self.peek(), 0)
                self.pos += 1
                if depth == 0:
                    return Expansion()
        if self.peek() == "(":
            self.pos += 1
            inner += self.commands(")")
            return Expansion()
        if self.peek() != "{":
            name = NAME.match(self.text, self.pos)
            self.pos = name.end() if name else self.pos
            return Expansion(name=name.group() if name else None)
        self.pos += 1
        braced = BRACED_NAME.match(self.text, self.pos)
        if not braced:
            raise self.fail("a parameter expansion")
        self.pos = braced.end()
        if self.peek() == "}":
            self.pos += 1
            plain = not braced.group().startswith(("#", "!")) and not braced.group(2)
            return Expansion(name=braced.group(1) if plain else None)
        op = BRACED_OP.match(self.text, self.pos)
        if not op:
            raise self.fail("a parameter expansion")
        self.pos = op.end()
        default = self.word("}")
        inner += default.inner
        self.pos += 1
        return Expansion(default=default.literal if op.group() in (":-", "-") else None)

    def array_items(self) -> list[Word]:
        found: list[Word] = []
        while self.peek() != ")":
            if not self.peek():
                raise self.fail("an unclosed array")
            if self.peek() in " \t\n":
                self.pos += 1
            else:
                found.append(self.word(WORD_END))
        self.pos += 1
        return found


def _command_words(command: Command) -> list[Word]:
    """The words from the command's name on: keywords and assignments before it dropped."""
    words = command.words
    while words and (words[0].literal in KEYWORDS or ASSIGNMENT.match(words[0].text)):
        words = words[1:]
    return words


def calls_of(commands: list[Command]) -> list[tuple[str, list[Word]]]:
    """Every command run, substitutions and `trap` handlers included: its
    literal name, or `$name` when a variable names it, and its arguments."""
    found: list[tuple[str, list[Word]]] = []
    for command in commands:
        for word in [*command.words, *command.redirects]:
            found += calls_of(word.inner)
            for item in word.items:
                found += calls_of(item.inner)
        words = _command_words(command)
        if not words or words[0].literal in LOOPS:
            continue
        while words and words[0].literal in WRAPPERS:
            wrapper = str(words[0].literal)
            found.append((wrapper, words[1:]))
            words = words[1:]
            while words and (words[0].literal or "").startswith("-"):
                if wrapper == "command" and words[0].literal in ("-v", "-V"):
                    words = []  # a lookup, nothing runs
                words = words[1:]
        if not words:
            continue
        first, args = words[0], words[1:]
        if first.literal is None:
            if first.variable:
                found.append((f"${first.variable}", args))
            continue
        if first.literal == "case":
            raise UnreadableShellError("case ... esac is not read by tests/shellreader.py")
        found.append((first.literal, args))
        handler = args[0].literal if first.literal == "trap" and args else None
        if handler is not None and handler != "-":
            found += calls_of(_Lexer(handler).commands())
    return found


def _assigned(commands: list[Command]) -> dict[str, set[str]]:
    """Variable -> the scripts (by base name) whose output `name=$(dir/x.sh)` gives it."""
    found: dict[str, set[str]] = {}
    for command in commands:
        for word in command.words:
            if match := ASSIGNMENT.match(word.text):
                scripts = {
                    inner.words[0].text.strip("\"'").rsplit("/", 1)[-1]
                    for inner in word.inner
                    if inner.words and "/" in inner.words[0].text
                }
                found.setdefault(match.group(1), set()).update(scripts)
    return found


def _prints(commands: list[Command]) -> set[str]:
    """The literal words the script echoes to its output, one a command."""
    found: set[str] = set()
    for command in commands:
        words = _command_words(command)
        if len(words) == 2 and words[0].literal == "echo" and not command.redirects:
            found.add(words[1].literal or "")
    return found - {""}


def read_script(text: str) -> Script:
    """The commands a script runs (its `#!` interpreter first), the functions
    it defines, the files it sources, and what it hands its caller."""
    lexer = _Lexer(text)
    commands = lexer.commands()
    calls = calls_of(commands)
    shebang = text.splitlines()[0].split() if text.startswith("#!") else []
    if shebang:
        interpreter = (
            shebang[1:2] if shebang[0].endswith("/env") else [shebang[0].rsplit("/", 1)[-1]]
        )
        calls = [(name, []) for name in interpreter] + calls
    sourced = {
        args[0].text.strip("\"'").rsplit("/", 1)[-1]
        for name, args in calls
        if name in (".", "source") and args
    }
    return Script(calls, lexer.functions, sourced, _assigned(commands), _prints(commands))


def programs(script: Script, functions: set[str], prints: Mapping[str, set[str]]) -> set[str]:
    """The external programs among its commands: not builtins, not functions
    (its own or `functions`), not paths; a variable run as a command stands
    for what the scripts it was assigned from print (`prints`, by base name)."""
    names: set[str] = set()
    for name, _ in script.calls:
        if name.startswith("$"):
            for source in script.assigned.get(name[1:], set()):
                names |= prints.get(source, set())
        else:
            names.add(name)
    return {
        n
        for n in names
        if n not in BUILTINS | KEYWORDS | script.functions | functions and "/" not in n
    }
