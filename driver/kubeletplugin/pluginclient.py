"""Client side of the kubelet plugin API over unix sockets.

Used by the kubelet stand-in (localsim/standin/kubelet.py) and by this daemon's
own probes, which call the real services over the real sockets.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from driver.kubeletplugin import protocol


def channel(socket_path: Path) -> grpc.Channel:
    return grpc.insecure_channel(f"unix:{socket_path}")


def _unary(ch: grpc.Channel, service: str, method: str, request: Any, response: Any) -> Any:
    return ch.unary_unary(
        f"/{service}/{method}",
        request_serializer=type(request).SerializeToString,
        response_deserializer=response.FromString,
    )


def get_info(ch: grpc.Channel, timeout: float) -> Any:
    api = protocol.registration
    request = api.InfoRequest()
    call = _unary(ch, protocol.REGISTRATION_SERVICE, "GetInfo", request, api.PluginInfo)
    return call(request, timeout=timeout)


def notify_registration(ch: grpc.Channel, registered: bool, error: str, timeout: float) -> None:
    api = protocol.registration
    request = api.RegistrationStatus(plugin_registered=registered, error=error)
    call = _unary(
        ch,
        protocol.REGISTRATION_SERVICE,
        "NotifyRegistrationStatus",
        request,
        api.RegistrationStatusResponse,
    )
    call(request, timeout=timeout)


def dra_api(version: str) -> tuple[str, Any]:
    """(service name, message module) of `v1` or `v1beta1`."""
    if version == "v1":
        return protocol.DRA_V1_SERVICE, protocol.dra_v1
    if version == "v1beta1":
        return protocol.DRA_V1BETA1_SERVICE, protocol.dra_v1beta1
    raise ValueError(f"version: {version!r} is not v1 or v1beta1")


def node_prepare(
    ch: grpc.Channel, claims: Sequence[tuple[str, str, str]], timeout: float, version: str = "v1"
) -> Any:
    """NodePrepareResources for (namespace, uid, name) claims."""
    service, api = dra_api(version)
    request = api.NodePrepareResourcesRequest(
        claims=[api.Claim(namespace=ns, uid=uid, name=name) for ns, uid, name in claims]
    )
    call = _unary(ch, service, "NodePrepareResources", request, api.NodePrepareResourcesResponse)
    return call(request, timeout=timeout)


def node_unprepare(
    ch: grpc.Channel, claims: Sequence[tuple[str, str, str]], timeout: float, version: str = "v1"
) -> Any:
    service, api = dra_api(version)
    request = api.NodeUnprepareResourcesRequest(
        claims=[api.Claim(namespace=ns, uid=uid, name=name) for ns, uid, name in claims]
    )
    call = _unary(
        ch, service, "NodeUnprepareResources", request, api.NodeUnprepareResourcesResponse
    )
    return call(request, timeout=timeout)


def watch_health(ch: grpc.Channel) -> Any:
    """The NodeWatchResources stream: iterate it, `.cancel()` it when done."""
    api = protocol.health
    call = ch.unary_stream(
        f"/{protocol.HEALTH_SERVICE}/NodeWatchResources",
        request_serializer=api.NodeWatchResourcesRequest.SerializeToString,
        response_deserializer=api.NodeWatchResourcesResponse.FromString,
    )
    return call(api.NodeWatchResourcesRequest())
