"""The examples' variants (deploy/examples/README.md). Kubernetes 1.36: each
replaces a file of the same name, holds the same objects, and puts PodGroups
and DeviceTaintRules in the API versions the release table says each release
serves; the example tests apply the variant only on its release. The Trn3 Gen1
rack of the real nodes: every file fitted to its 4 servers."""

import json
import re
from pathlib import Path

import yaml

from localsim.controlplane.k8srelease import DEFAULT, V1_36, Release
from simdevice.topology import rack_spec
from testbed.examples.rackscale import WRITTEN_FOR, for_rack
from testbed.localcluster import EXAMPLES, example_file

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
        "nccom-test/k8s-1.36/nccom-test.yaml",
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


ALL_FILES = sorted(EXAMPLES.glob("*/*.yaml")) + VARIANTS
GEN1 = rack_spec("trn3-gen1")


def test_fitting_an_example_to_the_rack_it_is_written_for_changes_nothing() -> None:
    for path in ALL_FILES:
        assert for_rack(path.read_text(), WRITTEN_FOR) == path.read_text(), path


def test_on_a_gen1_rack_whole_rack_jobs_have_a_pod_per_server_and_servers_exist() -> None:
    for path in ALL_FILES:
        fitted = for_rack(path.read_text(), GEN1)
        docs = [doc for doc in yaml.safe_load_all(fitted) if doc]
        assert len(docs) == len(objects(path)), path
        indexes = [int(i) for i in re.findall(r"serverIndex == (\d+)", fitted)]
        indexes += [int(i) for i in re.findall(r"device: server(\d\d)", fitted)]
        assert all(i < GEN1.servers for i in indexes), (path, indexes)
        code = "\n".join(x for x in fitted.splitlines() if not x.lstrip().startswith("#"))
        rack_sized = rf"\b(?:{WRITTEN_FOR.servers}|{WRITTEN_FOR.chips})\b"
        assert not re.search(rack_sized, code), (path, re.findall(rf".*{rack_sized}.*", code))
    rack = for_rack((EXAMPLES / "gang-rack/gang-rack.yaml").read_text(), GEN1)
    group, job = (d for d in yaml.safe_load_all(rack) if d and d["kind"] in ("PodGroup", "Job"))
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (4, 4)
    workload = job["spec"]["template"]["metadata"]["annotations"]["trainium.sim.dev/workload"]
    assert json.loads(workload)["chips"] == 64
    taint = for_rack((EXAMPLES / "drain-chip/2-drain.yaml").read_text(), GEN1)
    [rule] = [d for d in yaml.safe_load_all(taint) if d]
    assert rule["spec"]["deviceSelector"]["device"] == "server02-chip02"
    assert rule["metadata"]["name"] == "example-drain-server06-chip02"
