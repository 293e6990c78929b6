"""A manager's CRDs and webhook configurations for the local cluster, read from
the module's `config/` that its build script copied beside the binary, as the
kustomizations there list and patch them."""

from pathlib import Path
from typing import Any

import yaml

from localsim.addon.install import ManagerInstall
from localsim.addon.webhooks import (
    WEBHOOK_KINDS,
    Patch,
    local_webhook_configuration,
    patched,
    with_conversion,
)


def _kustomization(directory: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((directory / "kustomization.yaml").read_text())
    return document


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def _patches(directory: Path, kustomization: dict[str, Any]) -> list[Patch]:
    """The kustomization's `patches`, inline (`patch`) or in a file (`path`)."""
    found = []
    for entry in kustomization.get("patches") or []:
        text = entry["patch"] if "patch" in entry else (directory / entry["path"]).read_text()
        found.append(Patch(yaml.safe_load(text), entry.get("target")))
    return found


def crds(install: ManagerInstall, base_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """Every CRD the kustomization lists, those its patches convert by webhook
    converting through the manager at `base_url`."""
    kustomization = _kustomization(install.crd_dir)
    conversions = {
        patch.body["metadata"]["name"]: patch.body
        for patch in _patches(install.crd_dir, kustomization)
        if isinstance(patch.body, dict) and (patch.body.get("spec") or {}).get("conversion")
    }
    found = []
    for resource in kustomization["resources"]:
        for crd in _documents(install.crd_dir / resource):
            conversion = conversions.get(crd["metadata"]["name"])
            found.append(
                crd if conversion is None else with_conversion(crd, conversion, base_url, ca_pem)
            )
    return found


def webhook_configurations(
    install: ManagerInstall, base_url: str, ca_pem: bytes
) -> list[dict[str, Any]]:
    """The mutating and validating configurations with the kustomization's
    patches, named `<NAME>-...` as upstream's prefix names them, every webhook
    calling the manager at `base_url`."""
    kustomization = _kustomization(install.webhook_dir)
    patches = _patches(install.webhook_dir, kustomization)
    return [
        local_webhook_configuration(
            patched(document, patches), f"{install.NAME}-", base_url, ca_pem
        )
        for resource in kustomization["resources"]
        for document in _documents(install.webhook_dir / resource)
        if document["kind"] in WEBHOOK_KINDS
    ]
