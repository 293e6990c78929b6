"""The shell reader behind tests/test_external_programs.py finds commands
where bash runs them and nowhere else."""

import pytest

from tests.shellreader import UnreadableShellError, programs, read_script


def run_by(text: str, prints: dict[str, set[str]] | None = None) -> set[str]:
    return programs(read_script(text), set(), prints or {})


def test_substitutions_run_their_commands_and_nothing_else_does() -> None:
    text = (
        'key=$(a "$x" | b -c1-16)\n'
        'echo "v=$(c)" ${X:-$(d)} $((1 + 2))\n'
        "comm <(e) <(f | g)\n"
        'for n in $(h) literal; do i "$n"; done\n'
    )
    assert run_by(text) == {"a", "b", "c", "d", "comm", "e", "f", "g", "h", "i"}


def test_keywords_builtins_functions_variables_and_paths_are_not_programs() -> None:
    text = (
        'log() { echo "$*" >&2; }\n'
        'if ! [ -x "$bin" ]; then log missing; fi\n'
        "{ cd /tmp && set -e; } || exit 1\n"
        '"$here/build.sh" "${args[@]}"; ./local.sh; "${cmd[@]}" go\n'
        "local a=1 b=(); export X=y; readonly Z\n"
    )
    assert run_by(text) == set()


def test_redirection_targets_and_assignment_prefixes_are_not_programs() -> None:
    text = (
        'CGO_ENABLED=0 GOFLAGS=-x go build >"$out" 2>&1 <<<"$in"\nsort > out.txt\ntee</dev/null\n'
    )
    assert run_by(text) == {"go", "sort", "tee"}


def test_a_default_names_the_program_a_variable_may_override() -> None:
    assert run_by('"${KIND:-kind}" load image-archive x\n${HELM-helm} version\n') == {
        "kind",
        "helm",
    }
    assert run_by('"${KIND:?set KIND}" load\n') == set()


def test_wrappers_run_their_command_unless_they_only_look_it_up() -> None:
    text = "command -v docker >/dev/null\nexec make test\nxargs -r rmi\ncommand git status\n"
    assert run_by(text) == {"make", "xargs", "rmi", "git"}


def test_trap_handlers_are_read_as_code() -> None:
    text = "trap 'rm -rf \"$dir\"' EXIT\ntrap cleanup RETURN\ntrap - EXIT\ncleanup() { :; }\n"
    assert run_by(text) == {"rm"}


def test_array_elements_are_words_but_their_substitutions_run() -> None:
    text = 'kubectl=("${KUBECTL:-kubectl}" --context x)\npolicy=(--signature-policy "$(p)")\n'
    assert run_by(text) == {"p"}


def test_a_variable_run_as_a_command_runs_what_its_script_prints() -> None:
    pick = read_script(
        "if command -v docker >/dev/null; then\n  echo docker\n"
        'else\n  echo podman\nfi\necho "log" >&2\n'
    )
    assert pick.prints == {"docker", "podman"}
    user = 'engine=${ENGINE:-$("$here/pick.sh")}\n"$engine" ps -a\n'
    assert run_by(user, {"pick.sh": pick.prints}) == {"docker", "podman"}
    assert run_by(user) == set()


def test_the_interpreter_of_the_shebang_runs_the_script() -> None:
    assert run_by("#!/usr/bin/env bash\ntrue\n") == {"bash"}
    assert run_by("#!/bin/sh\n") == {"sh"}


def test_functions_and_sourced_files_are_recorded() -> None:
    script = read_script(
        '. "$here/../lib/debian-packages.sh"\nstep() {\n  make "$1"\n}\nstep kind-up\n'
    )
    assert script.functions == {"step"}
    assert script.sourced == {"debian-packages.sh"}
    assert programs(script, set(), {}) == {"make"}
    assert programs(read_script("install_missing x y\n"), {"install_missing"}, {}) == set()


@pytest.mark.parametrize(
    "text",
    ["x=`date`\n", "cat <<EOF\nhi\nEOF\n", 'case "$1" in a) b ;; esac\n', "echo $(unclosed\n"],
    ids=["backticks", "here-document", "case", "unclosed"],
)
def test_what_it_cannot_read_it_refuses(text: str) -> None:
    with pytest.raises(UnreadableShellError):
        read_script(text)
