"""How the real-node benchmark finds each node's daemon process for py-spy: by
its command line among the node cgroup's processes."""

import os
import sys

import pytest

from benchmarks.realnodes import command_line, is_daemon


@pytest.mark.parametrize(
    "argv",
    [
        ["/usr/bin/python3", "/usr/local/bin/trainium-dra", "node", "--node=n1"],
        ["/opt/venv/bin/trainium-dra", "node", "--driver-name=x"],
    ],
)
def test_the_daemon_is_found_whether_run_by_its_script_or_an_interpreter(
    argv: list[str],
) -> None:
    assert is_daemon(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["/usr/local/bin/trainium-dra", "controller"],
        ["/usr/bin/python3", "/usr/local/bin/trainium-dra", "up", "--real-nodes"],
        ["/usr/bin/kubelet", "--config=/x", "node"],
        ["/usr/bin/python3", "-m", "trainium-dra", "x", "node"],
        [],
    ],
)
def test_other_processes_are_not_the_daemon(argv: list[str]) -> None:
    assert not is_daemon(argv)


def test_a_command_line_is_read_from_proc_and_a_gone_process_has_none() -> None:
    assert command_line(os.getpid()) == sys.orig_argv
    assert command_line(2**22 + 1) == []
