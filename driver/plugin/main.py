"""`trainium-dra node`: run the node daemon for one or more simulated nodes."""

import logging
import signal
import sys
import threading
from types import FrameType

from kubernetes import client, config
from prometheus_client import CollectorRegistry

from driver.plugin import flags as flagmod
from driver.plugin.checkpoint import CheckpointError
from driver.plugin.cluster import ApiReader
from driver.plugin.devices import NodePlace
from driver.plugin.healthreport import HealthReporter
from driver.plugin.httpserver import StatusServer
from driver.plugin.layout import NodeLayout, node_path
from driver.plugin.metrics import DriverMetrics
from driver.plugin.node import HealthSink, NodeOptions, SimNode
from driver.plugin.sockets import SocketPathError
from driver.plugin.telemetry import TelemetryCollector
from simdevice.topology import rack_spec

log = logging.getLogger("trainium-dra.node")


def api_client(flags: flagmod.Flags) -> client.ApiClient:
    if flags.kubeconfig is not None:
        return config.new_client_from_config(config_file=str(flags.kubeconfig))
    config.load_incluster_config()
    return client.ApiClient()


def split_address(text: str, flag: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise SystemExit(f"{flag}: {text!r} must be HOST:PORT, e.g. 127.0.0.1:8080")
    return host or "0.0.0.0", int(port)


def build_nodes(
    flags: flagmod.Flags, reader: ApiReader, metrics: DriverMetrics, sink: HealthSink
) -> list[SimNode]:
    rack = rack_spec(flags.generation)
    tcp = split_address(flags.workload_tcp, "--workload-tcp") if flags.workload_tcp else None
    nodes = []
    for i, spec in enumerate(flags.nodes):
        if not 0 <= spec.server_index < rack.servers:
            raise SystemExit(
                f"--node: server index {spec.server_index} of {spec.name} is outside "
                f"{flags.generation}'s servers 0..{rack.servers - 1}"
            )
        nodes.append(
            SimNode(
                driver=flags.driver_name,
                place=NodePlace(spec.name, flags.ultraserver, spec.server_index, rack),
                layout=NodeLayout(
                    kubelet_root=node_path(flags.kubelet_root, spec.name),
                    driver=flags.driver_name,
                    state_dir=node_path(flags.state_dir, spec.name),
                    cdi_dir=node_path(flags.cdi_dir, spec.name),
                    pod_uid=flags.pod_uid,
                ),
                reader=reader,
                metrics=metrics,
                options=NodeOptions(
                    grpc_workers=flags.grpc_workers,
                    health_interval=flags.health_interval,
                    health_timeout=flags.health_timeout,
                    workload_tcp=(tcp[0], tcp[1] + i if tcp[1] else 0) if tcp else None,
                ),
                health_sink=sink,
            )
        )
    return nodes


def run(flags: flagmod.Flags) -> int:
    api = api_client(flags)
    reader = ApiReader(api, flags.driver_name, flags.slice_cache_seconds)
    registry = CollectorRegistry()
    metrics = DriverMetrics(registry)
    nodes = build_nodes(flags, reader, metrics, HealthReporter(api))
    registry.register(TelemetryCollector(nodes))
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started: list[SimNode] = []
    status = StatusServer(*split_address(flags.http_address, "--http-address"), registry, nodes)
    serving = False
    try:
        for node in nodes:
            node.start()
            started.append(node)
        status.start()
        serving = True
        print(f"ready http={status.port} nodes={len(nodes)}", file=sys.stderr, flush=True)
        stop.wait()
    finally:
        if serving:
            status.stop()
        for node in reversed(started):
            node.stop()
    log.info("stopped")
    return 0


def main(argv: list[str]) -> int:
    flags = flagmod.parse(argv)
    logging.basicConfig(
        level=flags.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return run(flags)
    except (CheckpointError, SocketPathError) as err:
        print(f"trainium-dra node: {err}", file=sys.stderr)
        return 1
