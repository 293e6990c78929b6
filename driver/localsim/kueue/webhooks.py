"""Kueue's webhook configurations and CRD conversion, pointed at the manager
on loopback: upstream names a Service in Kueue's namespace; the local cluster
has no Service network, so each `clientConfig` becomes a URL on 127.0.0.1
with the cluster CA's bundle. Pure functions of the module's manifests."""

import base64
import copy
from collections.abc import Iterable, Mapping
from typing import Any

NAME_PREFIX = "kueue-"
"""Upstream's kustomization prefixes every name with it."""

WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def client_config(base_url: str, path: str, ca_pem: bytes) -> dict[str, str]:
    return {"url": f"{base_url}{path}", "caBundle": base64.b64encode(ca_pem).decode()}


def merge_webhook_patches(
    configuration: Mapping[str, Any], patches: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """`configuration` with the fields of each patch of the same kind and name
    set on its webhooks, matched by webhook name (upstream's namespace
    selectors for the pod webhooks)."""
    merged = copy.deepcopy(dict(configuration))
    by_name = {hook["name"]: hook for hook in merged.get("webhooks") or []}
    for patch in patches:
        same = patch.get("kind") == merged.get("kind") and (
            patch["metadata"]["name"] == merged["metadata"]["name"]
        )
        for hook in patch.get("webhooks") or [] if same else []:
            if hook["name"] not in by_name:
                raise ValueError(
                    f"{merged['kind']}/{merged['metadata']['name']}: a patch names webhook "
                    f"{hook['name']!r}, which it does not have"
                )
            by_name[hook["name"]].update(copy.deepcopy(hook))
    return merged


def local_webhook_configuration(
    configuration: Mapping[str, Any],
    patches: Iterable[Mapping[str, Any]],
    base_url: str,
    ca_pem: bytes,
) -> dict[str, Any]:
    """The configuration with its patches, its name prefixed, and every
    webhook calling `base_url` + the path upstream gives its Service."""
    local = merge_webhook_patches(configuration, patches)
    local["metadata"] = {"name": NAME_PREFIX + local["metadata"]["name"]}
    for hook in local.get("webhooks") or []:
        service = hook["clientConfig"].get("service")
        if service is None:
            raise ValueError(f"webhook {hook['name']}: expected a service clientConfig")
        hook["clientConfig"] = client_config(base_url, service["path"], ca_pem)
    return local


def with_conversion(
    crd: Mapping[str, Any], patch: Mapping[str, Any], base_url: str, ca_pem: bytes
) -> dict[str, Any]:
    """The CRD converting between its versions through the manager, as the
    patch upstream applies to it says, at `base_url`."""
    webhook = patch["spec"]["conversion"]["webhook"]
    path = webhook["clientConfig"]["service"]["path"]
    converted = copy.deepcopy(dict(crd))
    converted["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": client_config(base_url, path, ca_pem),
            "conversionReviewVersions": list(webhook["conversionReviewVersions"]),
        },
    }
    return converted
