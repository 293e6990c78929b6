"""Kueue's CRDs and webhook configurations for the local cluster, read from
the module's `config/` that hack/kueue/build.sh copied beside the binary, as
its kustomizations list them."""

from pathlib import Path
from typing import Any

import yaml

from driver.localsim.kueue.install import KueueInstall
from driver.localsim.kueue.webhooks import (
    WEBHOOK_KINDS,
    local_webhook_configuration,
    with_conversion,
)


def _kustomization(directory: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((directory / "kustomization.yaml").read_text())
    return document


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def crds(install: KueueInstall, base_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """Every CRD the kustomization lists, those its patches convert by webhook
    converting through the manager at `base_url`."""
    kustomization = _kustomization(install.crd_dir)
    conversions = {}
    for entry in kustomization.get("patches") or []:
        for patch in _documents(install.crd_dir / entry["path"]):
            if (patch.get("spec") or {}).get("conversion"):
                conversions[patch["metadata"]["name"]] = patch
    found = []
    for resource in kustomization["resources"]:
        for crd in _documents(install.crd_dir / resource):
            conversion = conversions.get(crd["metadata"]["name"])
            found.append(
                crd if conversion is None else with_conversion(crd, conversion, base_url, ca_pem)
            )
    return found


def webhook_configurations(
    install: KueueInstall, base_url: str, ca_pem: bytes
) -> list[dict[str, Any]]:
    """The mutating and validating configurations with the kustomization's
    patches, every webhook calling the manager at `base_url`."""
    kustomization = _kustomization(install.webhook_dir)
    patches = [yaml.safe_load(entry["patch"]) for entry in kustomization.get("patches") or []]
    return [
        local_webhook_configuration(document, patches, base_url, ca_pem)
        for resource in kustomization["resources"]
        for document in _documents(install.webhook_dir / resource)
        if document["kind"] in WEBHOOK_KINDS
    ]
