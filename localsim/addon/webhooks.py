"""A manager's webhook configurations and CRD conversion, pointed at the
manager on loopback: upstream names a Service in the manager's namespace; the
local cluster has no Service network, so each `clientConfig` becomes a URL on
127.0.0.1 with the cluster CA's bundle. Also the two kinds of kustomize patch
upstream applies to them. Pure functions of the module's manifests."""

import base64
import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


@dataclass(frozen=True)
class Patch:
    """One entry of a kustomization's `patches`."""

    body: Any
    """A partial object, merged into the object of its kind and name, or a
    list of JSON Patch (RFC 6902) operations for the objects `target` selects."""
    target: Mapping[str, str] | None = None


def client_config(base_url: str, path: str, ca_pem: bytes) -> dict[str, str]:
    return {"url": f"{base_url}{path}", "caBundle": base64.b64encode(ca_pem).decode()}


def merge_webhook_patches(
    configuration: Mapping[str, Any], patches: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """`configuration` with the fields of each patch of the same kind and name
    set on its webhooks, matched by webhook name (Kueue's namespace selectors
    for its pod webhooks)."""
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


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ValueError(f"JSON pointer {path!r}: expected a leading /")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def json_patch(
    document: Mapping[str, Any], operations: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """`document` with the `add`, `replace` and `remove` operations applied, in
    order (LeaderWorkerSet's patches replace its pod webhooks this way)."""
    patched = copy.deepcopy(dict(document))
    for operation in operations:
        op, *parents, last = [operation["op"], *_pointer(operation["path"])]
        parent: Any = patched
        for part in parents:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        value = copy.deepcopy(operation.get("value"))
        if op not in ("add", "replace", "remove"):
            raise ValueError(f"JSON patch operation {op!r} at {operation['path']}: not supported")
        if isinstance(parent, list):
            index = len(parent) if last == "-" and op == "add" else int(last)
            if op != "add" and not 0 <= index < len(parent):
                raise ValueError(f"JSON patch {op} {operation['path']}: no such element")
            if op == "add":
                parent.insert(index, value)
            elif op == "replace":
                parent[index] = value
            else:
                del parent[index]
        else:
            if op != "add" and last not in parent:
                raise ValueError(f"JSON patch {op} {operation['path']}: no such field")
            if op == "remove":
                del parent[last]
            else:
                parent[last] = value
    return patched


def selects(target: Mapping[str, str], document: Mapping[str, Any]) -> bool:
    """Whether a kustomize patch target (group, version, kind, name, each
    optional) names `document`."""
    group, _, version = str(document.get("apiVersion", "")).rpartition("/")
    have = {
        "group": group,
        "version": version,
        "kind": document.get("kind"),
        "name": document["metadata"]["name"],
    }
    return all(have.get(key) == value for key, value in target.items() if key in have)


def patched(document: Mapping[str, Any], patches: Iterable[Patch]) -> dict[str, Any]:
    """`document` with every patch that applies to it, in order."""
    result = copy.deepcopy(dict(document))
    for patch in patches:
        if patch.target is not None and not selects(patch.target, result):
            continue
        if isinstance(patch.body, list):
            if patch.target is None:
                raise ValueError("a JSON patch in a kustomization needs a target")
            result = json_patch(result, patch.body)
        else:
            result = merge_webhook_patches(result, [patch.body])
    return result


def local_webhook_configuration(
    configuration: Mapping[str, Any], prefix: str, base_url: str, ca_pem: bytes
) -> dict[str, Any]:
    """The (patched) configuration with `prefix` before its name, as upstream's
    kustomization prefixes it, and every webhook calling `base_url` + the path
    upstream gives its Service."""
    local = copy.deepcopy(dict(configuration))
    local["metadata"] = {"name": prefix + local["metadata"]["name"]}
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
