"""Unit tests of what Kueue and LeaderWorkerSet share beside the local cluster
(localsim/addon/): the kustomize patches of both kinds, webhooks and
CRD conversion pointed at the manager on loopback, the manifests read from a
build's `config/`, and the missing-build message."""

import base64
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from localsim.addon import manifests
from localsim.addon.install import ManagerInstall, ManagerMissingError
from localsim.addon.webhooks import (
    Patch,
    json_patch,
    local_webhook_configuration,
    patched,
    selects,
    with_conversion,
)

BASE = "https://127.0.0.1:9443"


def hook(name: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {
            "service": {"name": "webhook-service", "namespace": "system", "path": path}
        },
        "failurePolicy": "Fail",
    }


MUTATING: dict[str, Any] = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "MutatingWebhookConfiguration",
    "metadata": {"name": "mutating-webhook-configuration"},
    "webhooks": [hook("mset.kb.io", "/mutate-set"), hook("mpod.kb.io", "/mutate--v1-pod")],
}
SELECTOR = {"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["kube-system"]}]}
TARGET = {
    "group": "admissionregistration.k8s.io",
    "version": "v1",
    "kind": "MutatingWebhookConfiguration",
    "name": "mutating-webhook-configuration",
}


def test_webhooks_call_the_manager_on_loopback_with_a_merged_patch() -> None:
    patch = {
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [{"name": "mpod.kb.io", "namespaceSelector": SELECTOR}],
    }
    local = local_webhook_configuration(patched(MUTATING, [Patch(patch)]), "kueue-", BASE, b"PEM")
    assert local["metadata"] == {"name": "kueue-mutating-webhook-configuration"}
    job, pod = local["webhooks"]
    assert pod["clientConfig"] == {
        "url": f"{BASE}/mutate--v1-pod",
        "caBundle": base64.b64encode(b"PEM").decode(),
    }
    assert pod["namespaceSelector"] == SELECTOR
    assert "namespaceSelector" not in job
    assert MUTATING["webhooks"][1]["clientConfig"]["service"]  # the input is left alone


def test_a_patch_for_a_webhook_the_configuration_lacks_is_an_error() -> None:
    patch = {**MUTATING, "webhooks": [{"name": "mnothing.kb.io", "namespaceSelector": SELECTOR}]}
    with pytest.raises(ValueError, match=r"mnothing\.kb\.io"):
        patched(MUTATING, [Patch(patch)])


def test_a_json_patch_replaces_the_webhook_its_target_names() -> None:
    replacement = {**hook("mpod.kb.io", "/mutate--v1-pod"), "objectSelector": SELECTOR}
    operations = [{"op": "replace", "path": "/webhooks/1", "value": replacement}]
    found = patched(MUTATING, [Patch(operations, TARGET)])
    assert found["webhooks"] == [MUTATING["webhooks"][0], replacement]
    other = Patch(operations, {**TARGET, "name": "validating-webhook-configuration"})
    assert patched(MUTATING, [other]) == MUTATING


def test_json_patch_adds_replaces_and_removes() -> None:
    document = {"a": {"b~c/d": 1}, "list": [1, 2, 3]}
    found = json_patch(
        document,
        [
            {"op": "replace", "path": "/a/b~0c~1d", "value": 2},
            {"op": "add", "path": "/list/-", "value": 4},
            {"op": "add", "path": "/list/0", "value": 0},
            {"op": "remove", "path": "/list/2"},
            {"op": "add", "path": "/new", "value": {"x": 1}},
        ],
    )
    assert found == {"a": {"b~c/d": 2}, "list": [0, 1, 3, 4], "new": {"x": 1}}
    assert document == {"a": {"b~c/d": 1}, "list": [1, 2, 3]}
    with pytest.raises(ValueError, match="no such element"):
        json_patch(document, [{"op": "replace", "path": "/list/3", "value": 0}])
    with pytest.raises(ValueError, match="not supported"):
        json_patch(document, [{"op": "move", "from": "/a", "path": "/b"}])


def test_a_target_selects_by_each_field_it_gives() -> None:
    assert selects({"kind": "MutatingWebhookConfiguration"}, MUTATING)
    assert selects(TARGET, MUTATING)
    assert not selects({**TARGET, "version": "v1beta1"}, MUTATING)


def test_a_json_patch_without_a_target_is_an_error() -> None:
    with pytest.raises(ValueError, match="needs a target"):
        patched(MUTATING, [Patch([{"op": "remove", "path": "/webhooks/0"}])])


CONVERSION = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "things.example.com"},
    "spec": {
        "conversion": {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"service": {"name": "s", "path": "/convert"}},
                "conversionReviewVersions": ["v1"],
            },
        }
    },
}


def test_conversion_goes_to_the_manager() -> None:
    crd = {"kind": "CustomResourceDefinition", "metadata": {"name": "x"}, "spec": {}}
    converted = with_conversion(crd, CONVERSION, BASE, b"PEM")
    webhook = converted["spec"]["conversion"]["webhook"]
    assert webhook["clientConfig"]["url"] == f"{BASE}/convert"
    assert webhook["conversionReviewVersions"] == ["v1"]
    assert crd["spec"] == {}


class Example(ManagerInstall):
    NAME: ClassVar[str] = "example"
    TITLE: ClassVar[str] = "Example"
    VERSION: ClassVar[str] = "v1.2.3"


def write(path: Path, *documents: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(documents))


def built(cache: Path) -> Example:
    """A build's `config/` in the layout both upstream modules use: CRDs listed
    in a kustomization with a conversion patch in a file, webhooks with a JSON
    patch in a file (LeaderWorkerSet's kind) and an inline merge patch
    (Kueue's kind)."""
    directory = cache / "example-v1.2.3"
    binary = directory / "example"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    crd = directory / "config" / "crd"
    plain = {**CONVERSION, "metadata": {"name": "plain.example.com"}, "spec": {}}
    write(crd / "bases" / "things.yaml", {**CONVERSION, "spec": {"group": "example.com"}})
    write(crd / "bases" / "plain.yaml", plain)
    write(crd / "patches" / "webhook_in_things.yaml", CONVERSION)
    write(
        crd / "kustomization.yaml",
        {
            "resources": ["bases/things.yaml", "bases/plain.yaml"],
            "patches": [{"path": "patches/webhook_in_things.yaml"}],
        },
    )
    webhook = directory / "config" / "webhook"
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "webhook-service"}}
    write(webhook / "manifests.yaml", MUTATING, service)
    replacement = {**hook("mpod.kb.io", "/mutate--v1-pod"), "objectSelector": SELECTOR}
    write(webhook / "pod.yaml", [{"op": "replace", "path": "/webhooks/1", "value": replacement}])
    inline = {
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [{"name": "mset.kb.io", "namespaceSelector": SELECTOR}],
    }
    write(
        webhook / "kustomization.yaml",
        {
            "resources": ["manifests.yaml"],
            "patches": [
                {"path": "pod.yaml", "target": TARGET},
                {"patch": yaml.safe_dump(inline)},
            ],
        },
    )
    return Example.locate(cache)


def test_manifests_of_a_build_with_both_kinds_of_patch(tmp_path: Path) -> None:
    install = built(tmp_path)
    things, plain = manifests.crds(install, BASE, b"PEM")
    assert things["spec"]["group"] == "example.com"
    assert things["spec"]["conversion"]["webhook"]["clientConfig"]["url"] == f"{BASE}/convert"
    assert plain["spec"] == {}
    [configuration] = manifests.webhook_configurations(install, BASE, b"PEM")
    assert configuration["metadata"]["name"] == "example-mutating-webhook-configuration"
    sets, pods = configuration["webhooks"]
    assert sets["namespaceSelector"] == SELECTOR
    assert pods["objectSelector"] == SELECTOR
    assert [h["clientConfig"]["url"] for h in (sets, pods)] == [
        f"{BASE}/mutate-set",
        f"{BASE}/mutate--v1-pod",
    ]


def test_a_missing_build_names_the_flag_and_the_make_target(tmp_path: Path) -> None:
    with pytest.raises(ManagerMissingError) as raised:
        Example.locate(tmp_path)
    message = str(raised.value)
    assert message.startswith("--with-example: Example v1.2.3 missing (")
    assert str(tmp_path / "example-v1.2.3" / "example") in message
    assert message.endswith("build it with `make example` (hack/example/build.sh)")
