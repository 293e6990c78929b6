"""A second `up` compares what it asks for with what runs, flag by flag."""

from pathlib import Path

from localsim.commands.flags import parse_up
from localsim.commands.upsettings import (
    UpSettings,
    differences,
    read_settings,
    write_settings,
)
from localsim.paths import ClusterPaths


def settings(*argv: str) -> UpSettings:
    return parse_up(list(argv)).settings


def test_the_same_flags_differ_in_nothing() -> None:
    assert differences(settings("--racks", "2"), settings("--racks=2")) == []


def test_a_default_written_out_is_no_difference() -> None:
    assert differences(settings(), settings("--pools", "rack", "--partition-sizes", "1,2,4")) == []


def test_each_differing_flag_is_named_with_both_values() -> None:
    changed = differences(settings(), settings("--racks", "2", "--with-kueue", "--pools", "node"))
    assert changed == [
        "--racks: running 1, asked 2",
        "--pools: running rack, asked node",
        "--with-kueue: running off, asked on",
        "--kueue-quota: running off, asked devices",
    ]


def test_the_aws_profile_names_its_profile_and_driver() -> None:
    changed = differences(settings(), settings("--profile", "aws"))
    assert "--profile: running trainium, asked aws" in changed
    assert "--driver-name: running trainium.sim.dev, asked neuron.aws.com" in changed


def test_settings_round_trip_through_the_state_directory(tmp_path: Path) -> None:
    paths = ClusterPaths(tmp_path)
    assert read_settings(paths) is None
    wanted = settings("--racks", "3", "--nodes-per-rack", "2", "--with-prometheus")
    write_settings(paths, wanted)
    assert read_settings(paths) == wanted
