"""A profile is chosen once by name, and each part of the driver asks it."""

import pytest

from driver.controller.flags import parse as parse_controller
from driver.devicemodel.profiles import AWS, PROFILES, TRAINIUM
from localsim.clusterspec import ClusterSpec, ClusterSpecError
from localsim.commands.flags import parse_up


def test_every_command_takes_the_same_profiles() -> None:
    assert sorted(PROFILES) == ["aws", "trainium"]
    assert parse_controller(["--profile", "aws"]).profile is AWS
    assert parse_controller([]).profile is TRAINIUM
    assert parse_up(["--profile", "aws"]).spec.profile == AWS.name


def test_the_driver_name_defaults_to_the_profiles() -> None:
    assert parse_controller(["--profile", "aws"]).driver_name == "neuron.aws.com"
    assert parse_controller([]).driver_name == "trainium.sim.dev"
    assert parse_controller(["--profile", "aws", "--driver-name", "x.dev"]).driver_name == "x.dev"
    assert parse_up(["--profile", "aws"]).spec.driver == "neuron.aws.com"


def test_only_an_ultraserver_node_of_the_aws_profile_gets_the_pair_and_quad_labels() -> None:
    aws = ClusterSpec.build(1, "trn3-gen1", profile="aws")
    rack = aws.racks[0]
    assert aws.profile_labels(rack, 3) == {
        "neuron.amazonaws.com/ultraserver-server-id-2": "rack-a-1",
        "neuron.amazonaws.com/ultraserver-server-id-4": "rack-a-0",
    }
    standalone = ClusterSpec.build(1, "trn2", profile="aws", instance_types=("trn2.48xlarge",))
    assert standalone.profile_labels(standalone.racks[0], 0) == {}
    trainium = ClusterSpec.build(1, "trn3-gen1")
    assert trainium.profile_labels(trainium.racks[0], 3) == {}


def test_instance_types_need_a_profile_that_takes_them() -> None:
    with pytest.raises(ClusterSpecError, match="--instance-type: needs --profile aws"):
        ClusterSpec.build(1, "trn2", instance_types=("trn2.48xlarge",))


def test_the_profiles_dialects_differ_in_api_version_and_ultraserver_fields() -> None:
    assert TRAINIUM.dialect.api_version == "trainium.sim.dev/v1alpha1"
    assert AWS.dialect.api_version == "neuron.aws.com/v1"
    assert "ultraserverMode" in AWS.dialect.fields["UltraServerConfig"]
    assert "ultraserverMode" not in TRAINIUM.dialect.fields["UltraServerConfig"]


def test_kueue_needs_a_profile_whose_classes_name_extended_resources(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parse_up(["--profile", "aws", "--with-kueue"])
    assert "--with-kueue: the aws profile's DeviceClasses" in capsys.readouterr().err
