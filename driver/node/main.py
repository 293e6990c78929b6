"""`trainium-dra node`: run the node daemon for one or more simulated nodes."""

import faulthandler
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from prometheus_client import CollectorRegistry

from driver.devicemodel.placement import NodePlace, PlacementError, find_place
from driver.httpendpoint import split_address
from driver.kubeapi.apiserver import ApiError, ApiServer, ApiUnreachableError
from driver.kubeapi.credentials import configuration
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import NODES, ULTRASERVERS
from driver.kubeletplugin.sockets import SocketPathError
from driver.mainwait import wait_for_stop
from driver.node import flags as flagmod
from driver.node.apireader import ApiReader
from driver.node.durable.checkpoint import CheckpointError
from driver.node.healthreport import HealthReporter
from driver.node.heartbeat import Heartbeat
from driver.node.mallocarenas import cap_malloc_arenas
from driver.node.metrics import DriverMetrics
from driver.node.paths import NodePaths, node_path
from driver.node.sim.simaccess import SimControlError, parse_address, read_token
from driver.node.sim.simcontrol import SimControlServer
from driver.node.sim.telemetry import TelemetryCollector
from driver.node.simnode import HealthSink, NodeOptions, SimNode
from driver.node.statusserver import StatusServer
from simdevice.topology import rack_spec

log = logging.getLogger("trainium-dra.node")


USER_AGENT = "trainium-dra-node"
REQUEST_TIMEOUT = 30.0


def node_objects(flags: flagmod.Flags) -> dict[str, Objects]:
    """Each node's way to the apiserver: one credential per node when
    --kubeconfig has {node} (as each node's daemon pod has its own node-bound
    token), else one shared; each credential has one connection pool."""

    def objects(kubeconfig: Path | None) -> Objects:
        return Objects(ApiServer(configuration(kubeconfig), USER_AGENT, REQUEST_TIMEOUT))

    template = str(flags.kubeconfig) if flags.kubeconfig is not None else ""
    if "{node}" not in template:
        shared = objects(flags.kubeconfig)
        return {node.name: shared for node in flags.nodes}
    return {node.name: objects(node_path(template, node.name)) for node in flags.nodes}


RESOLVE_RETRY_SECONDS = 5.0


def resolve_place(
    objects: Objects, flags: flagmod.Flags, node: flagmod.NodeSpec, stop: threading.Event
) -> NodePlace | None:
    """The node's place from its flags, else from the UltraServer objects (waiting for
    one to map the node); None when stopped while waiting."""
    if node.server_index is not None:
        rack = rack_spec(flags.generation)
        if not 0 <= node.server_index < rack.servers:
            raise PlacementError(
                f"--node: server index {node.server_index} of {node.name} is outside "
                f"{flags.generation}'s servers 0..{rack.servers - 1}"
            )
        return NodePlace(node.name, flags.ultraserver, node.server_index, rack)
    logged = ""
    while not stop.is_set():
        try:
            found = objects.get(NODES, node.name)
            if found is None:
                raise PlacementError(f"node {node.name}: no such Node")
            labels = found["metadata"].get("labels") or {}
            listed = objects.list_all(ULTRASERVERS)
            name, index, rack = find_place(node.name, labels, listed, flags.ultraserver)
            log.info("node %s is server %d of UltraServer %s", node.name, index, name)
            return NodePlace(node.name, name, index, rack)
        except (PlacementError, ApiError, ApiUnreachableError) as err:
            message = str(err).splitlines()[0]
            if message != logged:
                log.warning("%s; retrying every %.0fs", message, RESOLVE_RETRY_SECONDS)
                logged = message
        stop.wait(RESOLVE_RETRY_SECONDS)
    return None


def build_node(
    flags: flagmod.Flags,
    *,
    index: int,
    place: NodePlace,
    reader: ApiReader,
    metrics: DriverMetrics,
    sink: HealthSink,
) -> SimNode:
    tcp = split_address(flags.workload_tcp, "--workload-tcp") if flags.workload_tcp else None
    return SimNode(
        driver=flags.driver_name,
        dialect=flags.profile.dialect,
        workload_tags=flags.profile.workload_tags,
        place=place,
        paths=NodePaths(
            kubelet_root=node_path(flags.kubelet_root, place.node_name),
            driver=flags.driver_name,
            state_dir=node_path(flags.state_dir, place.node_name),
            cdi_dir=node_path(flags.cdi_dir, place.node_name),
            pod_uid=flags.pod_uid,
        ),
        reader=reader,
        metrics=metrics,
        options=NodeOptions(
            grpc_workers=flags.grpc_workers,
            health_interval=flags.health_interval,
            health_timeout=flags.health_timeout,
            workload_tcp=(tcp[0], tcp[1] + index if tcp[1] else 0) if tcp else None,
        ),
        health_sink=sink,
    )


def sim_control(flags: flagmod.Flags, nodes: list[SimNode]) -> SimControlServer | None:
    """The simulator's controls on their own listener, or None when turned off."""
    address = parse_address(flags.sim_control_address)
    if address is None:
        return None
    token_file = flags.sim_control_token_file
    token = read_token(Path(token_file)) if token_file else None
    return SimControlServer(address, nodes, token)


def wait_synced(reader: ApiReader, stop: threading.Event) -> bool:
    """Wait for the slice and UltraServer caches' first list, so the first
    prepare sees the rack; False when stopped while waiting."""
    waited = 0.0
    while not reader.wait_synced(RESOLVE_RETRY_SECONDS):
        waited += RESOLVE_RETRY_SECONDS
        log.warning("waiting %.0fs for the first list of ResourceSlices and UltraServers", waited)
        if stop.is_set():
            return False
    return True


def run(flags: flagmod.Flags) -> int:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    objects = node_objects(flags)
    places = [resolve_place(objects[node.name], flags, node, stop) for node in flags.nodes]
    if stop.is_set():
        return 0
    racks = {place.ultraserver for place in places if place is not None}
    reader = ApiReader(
        objects[flags.nodes[0].name].server,
        flags.driver_name,
        flags.slice_cache_seconds,
        ultraserver=racks.pop() if len(racks) == 1 else None,
    )
    reader.start()
    if not wait_synced(reader, stop):
        return 0
    registry = CollectorRegistry()
    metrics = DriverMetrics(registry)
    sinks = {api: HealthReporter(api) for api in set(objects.values())}
    nodes = [
        build_node(
            flags,
            index=i,
            place=place,
            reader=reader,
            metrics=metrics,
            sink=sinks[objects[place.node_name]],
        )
        for i, place in enumerate(places)
        if place is not None
    ]
    registry.register(TelemetryCollector(nodes))
    started: list[SimNode] = []
    beats = [
        Heartbeat(objects[node.name], node.name, flags.heartbeat_namespace, flags.heartbeat_seconds)
        for node in nodes
        if flags.heartbeat_seconds > 0
    ]
    status = StatusServer(*split_address(flags.http_address, "--http-address"), registry, nodes)
    control = sim_control(flags, nodes)
    serving = False
    try:
        for node in nodes:
            node.start()
            started.append(node)
        status.start()
        if control is not None:
            control.start()
        for beat in beats:
            beat.start()
        serving = True
        where = control.where() if control is not None else "off"
        # One write, newline included: print() writes the line and its newline
        # separately, and a log record from another thread landed between them.
        sys.stderr.write(f"ready http={status.port} nodes={len(nodes)} sim-control={where}\n")
        sys.stderr.flush()
        wait_for_stop(stop)
    finally:
        for beat in beats:
            beat.stop()
        if serving:
            status.stop()
            if control is not None:
                control.stop()
        for node in reversed(started):
            node.stop()
        reader.close()
    log.info("stopped")
    return 0


def main(argv: list[str]) -> int:
    flags = flagmod.parse(argv)
    cap_malloc_arenas()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # SIGUSR1 dumps every stack
    logging.basicConfig(
        level=flags.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return run(flags)
    except (CheckpointError, SocketPathError, PlacementError, SimControlError) as err:
        print(f"trainium-dra node: {err}", file=sys.stderr)
        return 1
