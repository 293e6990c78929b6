"""The inotify limits grow with the number of real nodes: raised before the
nodes start, never lowered, with an error that names the sysctl if they
cannot be raised."""

from pathlib import Path

import pytest

from localsim.realnodes import hostlimits


def proc(tmp_path: Path, instances: int, watches: int) -> Path:
    (tmp_path / "max_user_instances").write_text(f"{instances}\n")
    (tmp_path / "max_user_watches").write_text(f"{watches}\n")
    return tmp_path


def test_a_whole_rack_needs_more_than_the_kernel_default() -> None:
    raised = hostlimits.needed(36, {"max_user_instances": 128, "max_user_watches": 8192})
    assert raised["max_user_instances"] > 128 and raised["max_user_watches"] > 8192


def test_limits_already_high_enough_are_left_alone() -> None:
    assert hostlimits.needed(36, {"max_user_instances": 10**6, "max_user_watches": 10**7}) == {}


def test_the_limits_are_raised_and_said(tmp_path: Path) -> None:
    root = proc(tmp_path, 128, 10**7)
    said: list[str] = []
    hostlimits.raise_for(36, said.append, root)
    value = int((root / "max_user_instances").read_text())
    assert (
        value
        == hostlimits.needed(36, {"max_user_instances": 128, "max_user_watches": 10**7})[
            "max_user_instances"
        ]
    )
    assert (root / "max_user_watches").read_text() == f"{10**7}\n"
    assert said == [f"  raised fs.inotify.max_user_instances from 128 to {value}"]


def test_a_limit_that_cannot_be_raised_names_the_sysctl(tmp_path: Path) -> None:
    root = proc(tmp_path, 10**6, 10**7)
    # A read-only sysctl that even root cannot write, in place of the instances limit.
    (root / "max_user_instances").unlink()
    (root / "max_user_instances").symlink_to("/proc/sys/kernel/ngroups_max")
    current = int((root / "max_user_instances").read_text())
    with pytest.raises(RuntimeError, match=r"fs\.inotify\.max_user_instances is \d+, below"):
        hostlimits.raise_for(current, print, root)
    assert int((root / "max_user_instances").read_text()) == current
