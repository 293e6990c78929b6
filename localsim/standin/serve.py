"""Run a whole local cluster in the foreground until SIGTERM or SIGINT.

Order: control plane; the chart's CRDs, DeviceClasses and RBAC; the
controller; Nodes and UltraServers; one node daemon per rack; a kubelet
stand-in per node (registration, then pods). A child that dies is restarted,
as a Deployment or DaemonSet would; the node daemon recovers from its
checkpoint and its kubelets register it again.
"""

import contextlib
import functools
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import urllib3
from kubernetes import client

from driver.kubeapi.credentials import typed_client
from driver.names import API_GROUP, API_VERSION, WHOLE_BY_NAME, rack_label
from localsim import serviceaccounts
from localsim.clusterspec import (
    ClusterRack,
    ClusterSpec,
    node_labels,
    ultraserver_object,
)
from localsim.controlplane import chart
from localsim.controlplane.binaries import Binaries
from localsim.controlplane.chart import NAMESPACE
from localsim.controlplane.children import Child, trainium_dra_argv
from localsim.controlplane.plane import ControlPlane, ControlPlaneError, free_port
from localsim.kueue.manager import start_kueue
from localsim.lws.manager import start_lws
from localsim.paths import ClusterPaths
from localsim.prometheus import start_for_cluster
from localsim.serving import Progress, serve_cluster
from localsim.standin.argv import (
    OPERATOR_COMPONENT,
    controller_argv,
    node_daemon_argv,
    operator_argv,
    operator_values,
)
from localsim.standin.kubelet import KubeletStandIn
from localsim.standin.podsync import PodSync
from localsim.state import write_cluster

READY_TIMEOUT = 120.0
NODE_WRITERS = 8
TOKEN_CHECK_INTERVAL = 5.0


def wait_until(what: str, probe: Callable[[], bool], child: Child | None = None) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while not probe():
        if child is not None and not child.alive():
            raise ControlPlaneError(
                f"{child.name} exited with code {child.process.returncode} while {what}; "
                f"log {child.log_path}:\n{child.log_tail()}"
            )
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"timed out after {READY_TIMEOUT:.0f}s {what}")
        time.sleep(0.2)


def http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


class StandInCluster:
    """The processes and objects of one running local cluster."""

    def __init__(
        self,
        paths: ClusterPaths,
        spec: ClusterSpec,
        plane: ControlPlane,
        chart_values: Mapping[str, str] | None = None,
    ) -> None:
        self.paths = paths
        self.spec = spec
        self.plane = plane
        self.chart_values = {**operator_values(spec), **(chart_values or {})}
        self.children: dict[str, Child] = {}
        self.ports = {rack.name: free_port() for rack in spec.racks}
        self.controller_port = free_port()
        self.operator_port = free_port()
        self.kubelets: dict[str, dict[str, KubeletStandIn]] = {}
        self.pods: PodSync | None = None
        self.rendered: chart.Rendered | None = None
        self.bound_nodes: dict[str, str] = {}  # node -> UID of the Node its token is bound to
        self.tokens_checked = 0.0
        self.beside: dict[str, Child] = {}  # started after it (Kueue, LWS, ...), recorded too
        self.beside_urls: dict[str, str] = {}

    def _start_child(self, name: str, args: list[str]) -> Child:
        child = Child.start(name, trainium_dra_argv(args), self.paths.logs / f"{name}.log")
        self.children[name] = child
        self._record()
        return child

    def _record(self) -> None:
        pids = {c.name: c.process.pid for c in self.plane.components}
        pids.update({name: c.process.pid for name, c in self.children.items()})
        pids.update({name: c.process.pid for name, c in self.beside.items()})
        pids["serve"] = os.getpid()
        write_cluster(
            self.paths,
            {
                "spec": self.spec.to_json(),
                "kubeconfig": str(self.paths.kubeconfig),
                "metrics": {
                    rack: f"http://127.0.0.1:{p}/metrics" for rack, p in self.ports.items()
                },
                "controller_metrics": f"http://127.0.0.1:{self.controller_port}/metrics",
                "scheduler_metrics": f"https://127.0.0.1:{self.plane.config.ports.scheduler}/metrics",
                "sim_control": {
                    rack.name: str(self.paths.sim_control_socket(rack.name))
                    for rack in self.spec.racks
                },
                "pids": pids,
                **self.beside_urls,
            },
        )

    def record_beside(self, child: Child, **urls: str) -> None:
        """Record a process started beside the cluster, so `down` finds it after
        a crash, and where it serves (cluster.json keys)."""
        self.beside[child.name] = child
        self.beside_urls.update(urls)
        self._record()

    def start(self, progress: Callable[[str], None]) -> None:
        binaries = self.plane.binaries or Binaries.locate()
        progress("installing CRDs, DeviceClasses and RBAC from charts/trainium-dra (helm template)")
        rendered = chart.install(
            binaries, self.paths.kubeconfig, self.spec.driver, self.spec.profile, self.chart_values
        )
        kinds = sorted({o["kind"] for o in rendered.applied})
        progress(f"  applied {len(rendered.applied)} objects: {', '.join(kinds)}")
        if rendered.skipped:
            progress(f"  not applied (run as local processes): {', '.join(rendered.skipped)}")
        controller_account = serviceaccounts.service_account(rendered, "controller")
        progress(f"starting the controller as ServiceAccount {NAMESPACE}/{controller_account}")
        with typed_client(self.paths.kubeconfig) as api:
            serviceaccounts.write_account_kubeconfig(
                api, self.paths.kubeconfig, rendered, "controller", self.paths.controller_kubeconfig
            )
        self._start_child(
            "controller",
            controller_argv(
                self.paths, self.spec, self.controller_port, controller_account, NAMESPACE
            ),
        )
        if self.spec.ultraserver_operator:
            self._start_operator(rendered, progress)
        node_account = serviceaccounts.service_account(rendered, "node")
        with typed_client(self.paths.kubeconfig) as api:
            for rack in self.spec.racks:
                progress(
                    f"creating {rack.nodes} Nodes and UltraServer {rack.name} ({rack.generation})"
                )
                self._create_rack(api, rack)
                progress(
                    f"  node-bound tokens of ServiceAccount {NAMESPACE}/{node_account} "
                    f"for the {rack.nodes} nodes"
                )
                self.bound_nodes |= serviceaccounts.write_node_kubeconfigs(
                    api,
                    self.paths.kubeconfig,
                    rendered,
                    self.paths.node_kubeconfig_template,
                    rack.node_names(),
                )
        self.rendered = rendered
        for rack in self.spec.racks:
            progress(f"starting the node daemon of {rack.name} ({rack.nodes} simulated nodes)")
            self._start_daemon(rack)
        for rack in self.spec.racks:
            self._await_daemon(rack)
            self._register(rack)
            progress(f"  {rack.nodes} kubelet stand-ins registered the plugin of {rack.name}")
        api = typed_client(self.paths.kubeconfig)
        cdi_dirs = {n: self.paths.cdi_dir(n) for r in self.spec.racks for n in r.node_names()}
        kubelets = {n: k for by_node in self.kubelets.values() for n, k in by_node.items()}
        self.pods = PodSync(api, kubelets, cdi_dirs)
        self.pods.start()
        progress("waiting for the controller to publish the ResourceSlices")
        with typed_client(self.paths.kubeconfig) as api:
            for rack in self.spec.racks:
                wait_until(
                    f"waiting for {rack.name} to be published",
                    lambda rack=rack: published(api, rack),  # type: ignore[misc]
                    self.children["controller"],
                )
                count = slice_count(api, self.spec.driver, rack.name)
                progress(f"  {rack.name}: {count} ResourceSlices published")

    def _start_operator(self, rendered: chart.Rendered, progress: Callable[[str], None]) -> None:
        account = serviceaccounts.service_account(rendered, OPERATOR_COMPONENT)
        progress(f"starting the UltraServer operator as ServiceAccount {NAMESPACE}/{account}")
        with typed_client(self.paths.kubeconfig) as api:
            serviceaccounts.write_account_kubeconfig(
                api,
                self.paths.kubeconfig,
                rendered,
                OPERATOR_COMPONENT,
                self.paths.operator_kubeconfig,
            )
        self._start_child(
            OPERATOR_COMPONENT,
            operator_argv(self.paths, self.spec, self.operator_port, NAMESPACE),
        )

    def _create_rack(self, api: client.ApiClient, rack: ClusterRack) -> None:
        with ThreadPoolExecutor(NODE_WRITERS) as pool:
            done = pool.map(
                lambda server: self.plane.create_node(
                    rack.node_name(server), self._labels(rack, server)
                ),
                range(rack.nodes),
            )
            list(done)  # raises the first error
        client.CustomObjectsApi(api).create_cluster_custom_object(
            API_GROUP,
            API_VERSION,
            "ultraservers",
            ultraserver_object(
                rack, self.spec.device_mode, self.spec.pools, self.spec.partition_sizes
            ),
        )

    def _labels(self, rack: ClusterRack, server: int) -> dict[str, str]:
        return node_labels(rack, server) | self.spec.profile_labels(rack, server)

    def _start_daemon(self, rack: ClusterRack) -> None:
        argv = node_daemon_argv(self.paths, self.spec, rack, self.ports[rack.name], NAMESPACE)
        self._start_child(f"node-{rack.name}", argv)

    def _await_daemon(self, rack: ClusterRack) -> None:
        """Until every node of the rack's daemon answers on both sockets (/healthz)."""
        healthz = f"http://127.0.0.1:{self.ports[rack.name]}/healthz"
        daemon = self.children[f"node-{rack.name}"]
        wait_until(f"waiting for {daemon.name}", functools.partial(http_ok, healthz), daemon)

    def _register(self, rack: ClusterRack) -> None:
        by_node = self.kubelets.setdefault(rack.name, {})
        for node in rack.node_names():
            kubelet = by_node.get(node) or KubeletStandIn(
                self.paths.kubelet_root(node), self.spec.driver
            )
            kubelet.register(timeout=READY_TIMEOUT)
            by_node[node] = kubelet

    def renew_node_tokens(self, progress: Callable[[str], None]) -> None:
        """A Node deleted and created again invalidates the token bound to it, as
        a DaemonSet pod dies with its node; mint its successor a token, which the
        daemon reads from the rewritten kubeconfig."""
        if self.rendered is None or time.monotonic() - self.tokens_checked < TOKEN_CHECK_INTERVAL:
            return
        self.tokens_checked = time.monotonic()
        with typed_client(self.paths.kubeconfig) as api:
            renewed = serviceaccounts.recreated(api, self.bound_nodes)
            account = serviceaccounts.service_account(self.rendered, "node")
            for node, uid in renewed.items():
                token = serviceaccounts.request_token(api, account, (node, uid))
                path = Path(self.paths.node_kubeconfig_template.replace("{node}", node))
                serviceaccounts.write_kubeconfig(self.paths.kubeconfig, path, account, token)
                self.bound_nodes[node] = uid
                progress(f"Node {node} was created anew; its daemon got a token bound to it")

    def supervise(self, progress: Callable[[str], None]) -> None:
        """Restart a child that died (the apiserver and friends are the harness's)."""
        try:
            self.renew_node_tokens(progress)
        except (client.ApiException, urllib3.exceptions.HTTPError) as err:
            progress(f"checking the nodes' tokens failed ({err}); trying again")
        for name, child in list(self.children.items()):
            if child.alive():
                continue
            progress(f"{name} exited with code {child.process.returncode}; restarting it")
            child.stop()
            self._start_child(name, child.argv[3:])
            if name.startswith("node-"):
                rack = next(r for r in self.spec.racks if f"node-{r.name}" == name)
                self._await_daemon(rack)
                self._register(rack)

    def stop(self) -> None:
        """Pods first (no new prepares), then the daemons, then the controller."""
        if self.pods is not None:
            self.pods.stop()
        for name in sorted(self.children, key=lambda n: n == "controller"):
            self.children[name].stop()


def published(api: client.ApiClient, rack: ClusterRack) -> bool:
    try:
        obj = client.CustomObjectsApi(api).get_cluster_custom_object(
            API_GROUP, API_VERSION, "ultraservers", rack.name
        )
    except client.ApiException:
        return False
    status = obj.get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    mapped = (status.get("servers") or {}).get("mapped")
    return conditions.get("Published") == "True" and mapped == rack.nodes


def slice_count(api: client.ApiClient, driver: str, rack: str) -> int:
    """The rack's slices, in whichever pools its layout or profile puts them."""
    slices = client.ResourceV1Api(api).list_resource_slice(
        field_selector=f"spec.driver={driver}", label_selector=f"{rack_label(driver)}={rack}"
    )
    return len(slices.items)


def serve(
    paths: ClusterPaths,
    spec: ClusterSpec,
    with_prometheus: bool = False,
    with_kueue: bool = False,
    kueue_quota: str = "devices",
    *,
    with_lws: bool = False,
) -> int:
    """Start everything, report ready, run until signalled, stop everything."""
    progress = Progress()

    def when_started(
        cluster: StandInCluster, plane: ControlPlane, extras: contextlib.ExitStack
    ) -> str:
        kueue = None
        if with_kueue:
            applied = cluster.rendered.applied if cluster.rendered else []
            classes = [o for o in applied if o["kind"] == "DeviceClass"]
            kueue = start_kueue(paths, plane, spec, classes, progress, quota_mode=kueue_quota)
            extras.callback(kueue.stop)
            cluster.record_beside(kueue.child, kueue_metrics=f"https://{kueue.metrics_address}")
        if with_lws:
            lws = start_lws(paths, plane, progress)
            extras.callback(lws.stop)
            cluster.record_beside(lws.child, lws_metrics=f"https://{lws.metrics_address}")
        if with_prometheus:
            prometheus = start_for_cluster(
                paths.root,
                plane,
                cluster.ports,
                cluster.controller_port,
                kueue=kueue.metrics_address if kueue else None,
            )
            extras.callback(prometheus.stop)
            cluster.record_beside(prometheus.child, prometheus=prometheus.url)
            progress(f"prometheus: {prometheus.url}")
        return f"{spec.node_count()} nodes in {len(spec.racks)} racks"

    return serve_cluster(
        paths,
        progress,
        lambda: ControlPlane.running(paths.root, on_progress=progress),
        lambda plane: StandInCluster(paths, spec, plane, WHOLE_BY_NAME if with_kueue else None),
        when_started,
    )
