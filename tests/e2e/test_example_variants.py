"""The examples' Kubernetes 1.36 variants (deploy/examples/README.md): each
replaces a file of the same name, holds the same objects, and puts PodGroups
and DeviceTaintRules in the API versions the release table says each release
serves; the example tests apply the variant only on its release."""

from pathlib import Path

import yaml

from driver.localsim.k8srelease import DEFAULT, V1_36, Release
from tests.e2e.cluster import EXAMPLES, example_file

VARIANTS = sorted(EXAMPLES.glob("*/k8s-1.36/*.yaml"))


def objects(path: Path) -> list[dict[str, object]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def served_in(release: Release) -> dict[str, str]:
    return {"PodGroup": release.podgroup_api, "DeviceTaintRule": release.device_taint_rule_api}


def test_the_documented_variants_exist() -> None:
    names = {str(p.relative_to(EXAMPLES)) for p in VARIANTS}
    assert names == {
        "device-taints/k8s-1.36/1-maintenance-taint.yaml",
        "drain-chip/k8s-1.36/2-drain.yaml",
        "gang-rack/k8s-1.36/gang-rack.yaml",
        "gang-servers/k8s-1.36/gang-servers.yaml",
    }


def test_each_variant_holds_the_same_objects_in_its_releases_api_versions() -> None:
    for variant in VARIANTS:
        current = variant.parent.parent / variant.name
        old_objects, new_objects = objects(variant), objects(current)
        keys = [(o["kind"], o["metadata"]) for o in new_objects]
        assert [(o["kind"], o["metadata"]) for o in old_objects] == keys, variant
        for release, docs in ((V1_36, old_objects), (DEFAULT, new_objects)):
            for doc in docs:
                wanted = served_in(release).get(str(doc["kind"]))
                assert wanted is None or doc["apiVersion"] == wanted, (variant, release.minor)


def test_the_example_tests_apply_a_variant_only_on_its_release() -> None:
    name = "gang-rack/gang-rack.yaml"
    assert example_file(name, V1_36) == EXAMPLES / "gang-rack/k8s-1.36/gang-rack.yaml"
    assert example_file(name, DEFAULT) == EXAMPLES / name
    assert example_file("single-core/single-core.yaml", V1_36) == (
        EXAMPLES / "single-core/single-core.yaml"
    )
