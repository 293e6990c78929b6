"""The kubelet-facing gRPC services of one plugin, wired as generic handlers.

Messages come from the generated modules; the method tables are written here
so no generated service code is needed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from driver.kubeletplugin import protocol
from driver.kubeletplugin.healthstream import HealthMonitor
from driver.kubeletplugin.interface import ClaimPreparer, ClaimRef

log = logging.getLogger(__name__)


@dataclass
class RegistrationState:
    """What the kubelet told us in NotifyRegistrationStatus."""

    registered: bool = False
    error: str = ""


def registration_handler(
    driver: str, endpoint: str, state: RegistrationState
) -> grpc.GenericRpcHandler[Any, Any]:
    api = protocol.registration

    def get_info(request: Any, context: grpc.ServicerContext) -> Any:
        return api.PluginInfo(
            type=protocol.PLUGIN_TYPE,
            name=driver,
            endpoint=endpoint,
            supported_versions=list(protocol.SUPPORTED_VERSIONS),
        )

    def notify(request: Any, context: grpc.ServicerContext) -> Any:
        state.registered = bool(request.plugin_registered)
        state.error = str(request.error)
        if not state.registered:
            log.error("kubelet refused registration of %s: %s", driver, state.error)
        return api.RegistrationStatusResponse()

    return grpc.method_handlers_generic_handler(
        protocol.REGISTRATION_SERVICE,
        {
            "GetInfo": grpc.unary_unary_rpc_method_handler(
                get_info,
                request_deserializer=api.InfoRequest.FromString,
                response_serializer=api.PluginInfo.SerializeToString,
            ),
            "NotifyRegistrationStatus": grpc.unary_unary_rpc_method_handler(
                notify,
                request_deserializer=api.RegistrationStatus.FromString,
                response_serializer=api.RegistrationStatusResponse.SerializeToString,
            ),
        },
    )


def dra_handler(
    service: str, api: Any, preparer: ClaimPreparer
) -> grpc.GenericRpcHandler[Any, Any]:
    """DRAPlugin of one API version (`api` is its message module)."""
    with_share_id = "share_id" in api.Device.DESCRIPTOR.fields_by_name

    def refs(request: Any) -> list[ClaimRef]:
        return [ClaimRef(c.namespace, c.uid, c.name) for c in request.claims]

    def prepare(request: Any, context: grpc.ServicerContext) -> Any:
        response = api.NodePrepareResourcesResponse()
        for uid, result in preparer.prepare(refs(request)).items():
            entry = response.claims[uid]
            entry.error = result.error
            for d in result.devices:
                device = entry.devices.add(
                    request_names=[d.request],
                    pool_name=d.pool,
                    device_name=d.device,
                    cdi_device_ids=list(d.cdi_device_ids),
                )
                if with_share_id and d.share_id:
                    device.share_id = d.share_id
        return response

    def unprepare(request: Any, context: grpc.ServicerContext) -> Any:
        response = api.NodeUnprepareResourcesResponse()
        for uid, error in preparer.unprepare(refs(request)).items():
            response.claims[uid].error = error
        return response

    return grpc.method_handlers_generic_handler(
        service,
        {
            "NodePrepareResources": grpc.unary_unary_rpc_method_handler(
                prepare,
                request_deserializer=api.NodePrepareResourcesRequest.FromString,
                response_serializer=api.NodePrepareResourcesResponse.SerializeToString,
            ),
            "NodeUnprepareResources": grpc.unary_unary_rpc_method_handler(
                unprepare,
                request_deserializer=api.NodeUnprepareResourcesRequest.FromString,
                response_serializer=api.NodeUnprepareResourcesResponse.SerializeToString,
            ),
        },
    )


def health_handler(
    monitor: HealthMonitor, stopping: threading.Event
) -> grpc.GenericRpcHandler[Any, Any]:
    """NodeWatchResources: the full device list now, again on every change, and
    again whenever a third of the health-check timeout passed without one: the
    kubelet marks a device Unknown once its last update is older than that."""
    api = protocol.health
    status = {True: api.HEALTHY, False: api.UNHEALTHY}
    resend = monitor.timeout_seconds / 3

    def watch(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        version = -1
        sent = time.monotonic()
        while context.is_active() and not stopping.is_set():
            version, devices = monitor.wait_change(version, timeout=1.0)
            if devices is None:
                if time.monotonic() - sent < resend:
                    continue
                devices = monitor.devices
            sent = time.monotonic()
            yield api.NodeWatchResourcesResponse(
                devices=[
                    api.DeviceHealth(
                        device=api.DeviceIdentifier(pool_name=d.pool, device_name=d.device),
                        health=status[d.healthy],
                        last_updated_time=int(d.since),
                        health_check_timeout_seconds=monitor.timeout_seconds,
                        message=d.message,
                    )
                    for d in devices
                ]
            )

    return grpc.method_handlers_generic_handler(
        protocol.HEALTH_SERVICE,
        {
            "NodeWatchResources": grpc.unary_stream_rpc_method_handler(
                watch,
                request_deserializer=api.NodeWatchResourcesRequest.FromString,
                response_serializer=api.NodeWatchResourcesResponse.SerializeToString,
            )
        },
    )


def dra_handlers(
    preparer: ClaimPreparer, monitor: HealthMonitor, stopping: threading.Event
) -> list[grpc.GenericRpcHandler[Any, Any]]:
    return [
        dra_handler(protocol.DRA_V1_SERVICE, protocol.dra_v1, preparer),
        dra_handler(protocol.DRA_V1BETA1_SERVICE, protocol.dra_v1beta1, preparer),
        health_handler(monitor, stopping),
    ]
