"""The per-release table against what the release's own kube-apiserver says
about its feature gates, and the version lookup."""

import re
import subprocess

import pytest

from localsim.controlplane.binaries import Binaries
from localsim.controlplane.k8srelease import (
    DEFAULT,
    RELEASES,
    UnsupportedReleaseError,
    release_of,
)


def test_versions_map_to_their_minor_release() -> None:
    assert release_of("v1.37.2") is RELEASES["1.37"]
    assert release_of("v1.36.3") is RELEASES["1.36"]
    assert release_of("v1.37.0-rc.1") is RELEASES["1.37"]
    assert DEFAULT.version == "v1.37.2"
    with pytest.raises(UnsupportedReleaseError, match=r"v1\.34\.1.*v1\.36\.3, v1\.37\.2"):
        release_of("v1.34.1")
    with pytest.raises(UnsupportedReleaseError):
        release_of("1.37")


def test_every_release_turns_its_gates_on_and_names_no_dropped_gate() -> None:
    for release in RELEASES.values():
        assert set(release.feature_gates.values()) == {True}
        assert not set(release.feature_gates) & set(release.unnamed_gates)
        assert release.podgroup_api.startswith("scheduling.k8s.io/")
        assert release.device_taint_rule_api.startswith("resource.k8s.io/")


def help_gates(binary: Binaries) -> dict[str, tuple[str, bool]]:
    """`Name=true|false (STAGE - default=x)` lines of `kube-apiserver --help`."""
    text = subprocess.run(
        [str(binary.kube_apiserver), "--help"], capture_output=True, text=True, check=True
    ).stdout
    return {
        m["name"]: (m["stage"], m["default"] == "true")
        for m in re.finditer(
            r"(?P<name>\w+)=true\|false \((?P<stage>[A-Z]+) - default=(?P<default>true|false)\)",
            text,
        )
    }


@pytest.mark.integration
def test_the_release_table_matches_the_binarys_gates() -> None:
    """The gates of the release under test exist at the stage and default the
    table says; the ones the table leaves out (GA or removed) are not listed."""
    binaries = Binaries.locate()
    release = binaries.release
    known = help_gates(binaries)
    assert len(known) > 50, "kube-apiserver --help listed no feature gates"
    for gate in release.gates:
        assert known.get(gate.name) == (gate.stage, gate.default), gate
    for name in release.unnamed_gates:
        assert name not in known, name
