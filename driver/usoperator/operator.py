"""The running operator: kopf's watches wake one worker, which lists what it
needs, decides (driver/usoperator/allocate.py) and writes the differences.
Every pass starts from what the apiserver holds, so a restart loses nothing:
the allocations live in the NeuronUltraServers' statuses.

Writes of one pass, in this order: the workload's finalizer before anything
is held for it; the NeuronUltraServers' allocations (which the controller
turns into `workloadId` tags); the claim templates; pods standing on nodes
their workload no longer holds (or older than a RestartAll) deleted; the
workloads' statuses, with an Event when the state or its reason changes; a
deleted workload's template, then its pods, then its finalizer.
"""

import datetime
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import kopf
from kubernetes import client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from driver.httpendpoint import HTTPEndpoint, json_reply, metrics_reply, split_address
from driver.jsontypes import JSON
from driver.kopfrun import kopf_login, run_kopf
from driver.kubeapi.apiserver import MERGE_PATCH, ApiError, ApiServer
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import (
    CLAIMS,
    EVENTS,
    LEASES,
    NODES,
    PODS,
    SLICES,
    Resource,
    path_of,
)
from driver.names import HEARTBEAT_LABEL
from driver.usoperator.allocate import Decision, decide
from driver.usoperator.flags import Flags
from driver.usoperator.health import next_expiry, silent_daemons
from driver.usoperator.manifests import (
    claim_template,
    ultraserver_object,
    ultraserver_status,
    workload_status,
)
from driver.usoperator.model import (
    UltraServer,
    Workload,
    WorkloadError,
    busy_nodes,
    discover,
    held_from,
    known_members,
    parse_workload,
    workload_pods,
)
from driver.usoperator.names import (
    FINALIZER,
    MANAGED_BY,
    MANAGED_LABEL,
    TEMPLATES,
    ULTRASERVERS,
    WORKLOADS,
)

log = logging.getLogger(__name__)
USER_AGENT = "trainium-dra-ultraserver-operator"
REQUEST_TIMEOUT = 30.0
SETTLE_SECONDS = 0.3
"""Events come in bursts (a node's slices, a Deployment's pods): one pass after the burst."""
WARNING_REASONS = frozenset({"Degraded", "Restarted", "Migrated", "Unsatisfiable", "Invalid"})
EXPIRY_MARGIN = 0.2
"""Seconds past a heartbeat Lease's end before the pass that finds it silent."""


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


WORKLOAD_KIND = "NeuronUltraServerWorkload"
ULTRASERVER_KIND = "NeuronUltraServer"


class OperatorMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.passes = Counter(
            "trainium_dra_usoperator_passes", "Passes over every workload.", registry=registry
        )
        self.pass_seconds = Histogram(
            "trainium_dra_usoperator_pass_seconds",
            "Wall time of one pass: lists, decisions and writes.",
            registry=registry,
        )
        self.errors = Counter(
            "trainium_dra_usoperator_pass_errors",
            "Passes an apiserver error cut short.",
            registry=registry,
        )
        self.workloads = Gauge(
            "trainium_dra_usoperator_workloads",
            "Workloads by state after the last pass.",
            ["state"],
            registry=registry,
        )
        self.ultraservers = Gauge(
            "trainium_dra_usoperator_ultraservers",
            "UltraServers found, by health.",
            ["health"],
            registry=registry,
        )


class Operator:
    def __init__(self, flags: Flags, configuration: client.Configuration) -> None:
        self.flags = flags
        self.configuration = configuration
        self.objects = Objects(ApiServer(configuration, USER_AGENT, REQUEST_TIMEOUT))
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.registry = CollectorRegistry()
        self.metrics = OperatorMetrics(self.registry)
        self.last_error = ""
        self.look_again: float | None = None
        """Seconds until a heartbeat Lease runs out, as of the last pass."""
        self.worker = threading.Thread(target=self._work, name="passes", daemon=True)
        host, port = split_address(flags.http_address, "--http-address")
        self.http = HTTPEndpoint(
            host,
            port,
            {
                ("GET", "/metrics"): lambda _: metrics_reply(self.registry),
                ("GET", "/healthz"): lambda _: json_reply(
                    200 if self.worker.is_alive() else 503, {"lastError": self.last_error}
                ),
            },
        )

    def run(self) -> int:
        self.http.start()
        log.info("serving /metrics and /healthz on port %d", self.http.port)
        self.worker.start()
        try:
            self._run_kopf()
        finally:
            self.stop.set()
            self.wake.set()
            self.worker.join(timeout=10)
            self.http.stop()
        return 0

    def _run_kopf(self) -> None:
        registry = kopf.OperatorRegistry()
        kopf.on.login(registry=registry)(lambda **_: kopf_login(self.configuration))
        for res in (WORKLOADS, NODES, SLICES, CLAIMS):
            kopf.on.event(res.group, res.version, res.plural, registry=registry)(self._woken)
        run_kopf(registry, USER_AGENT)

    def _woken(self, **_: Any) -> None:
        self.wake.set()

    def _work(self) -> None:
        while not self.stop.is_set():
            wait = self.flags.resync_seconds
            if self.look_again is not None:
                wait = min(wait, self.look_again + EXPIRY_MARGIN)
            self.wake.wait(wait)
            if self.stop.is_set():
                return
            time.sleep(SETTLE_SECONDS)
            self.wake.clear()
            started = time.perf_counter()
            try:
                self.pass_once()
                self.last_error = ""
            except (ApiError, OSError) as err:
                self.last_error = str(err).splitlines()[0] if str(err) else type(err).__name__
                self.metrics.errors.inc()
                log.warning("pass cut short: %s", self.last_error)
                self.wake.set()
                self.stop.wait(1.0)
            finally:
                self.metrics.passes.inc()
                self.metrics.pass_seconds.observe(time.perf_counter() - started)

    def pass_once(self) -> list[Decision]:
        """Read everything, decide, write the differences."""
        driver = self.flags.driver_name
        slices = self.objects.list_all(SLICES, fields=f"spec.driver={driver}")
        nodes = {n["metadata"]["name"]: n for n in self.objects.list_all(NODES)}
        claims = self.objects.list_all(CLAIMS)
        raw = self.objects.list_all(WORKLOADS)
        ours = self.objects.list_all(ULTRASERVERS, namespace=self.flags.namespace)
        ns = self.flags.namespace
        leases = self.objects.list_all(LEASES, labels=HEARTBEAT_LABEL, namespace=ns)
        moment = datetime.datetime.now(datetime.UTC)
        self.look_again = next_expiry(leases, moment)
        servers = discover(
            slices,
            nodes,
            busy_nodes(claims, driver),
            driver,
            known=known_members(ours),
            silent=silent_daemons(leases, moment),
        )
        workloads = []
        for obj in raw:
            try:
                workloads.append(parse_workload(obj))
            except WorkloadError as err:
                self._refuse(obj, str(err))
        for w in workloads:
            if not w.deleting and FINALIZER not in w.finalizers:
                self._set_finalizers(w, [*w.finalizers, FINALIZER])
        decisions = decide(workloads, servers, held_from(ours))
        held = [h for d in decisions for h in d.held]
        self._write_ultraservers(servers, ours, held)
        pods = self._pods({w.namespace for w in workloads})
        templates = {
            (t["metadata"]["namespace"], t["metadata"]["name"])
            for t in self.objects.list_all(TEMPLATES, labels=f"{MANAGED_LABEL}={MANAGED_BY}")
        }
        stamp = now()
        for d in decisions:
            self._apply(d, pods, templates, stamp)
        self._count(decisions, servers)
        return decisions

    def _refuse(self, obj: Mapping[str, Any], message: str) -> None:
        status = {"state": "Failed", "reason": "Invalid", "message": message}
        meta = obj["metadata"]
        if (obj.get("status") or {}).get("message") != message:
            self.objects.patch_status(WORKLOADS, meta["name"], status, meta["namespace"])
            self._event(obj, WORKLOAD_KIND, "Invalid", message)

    def _set_finalizers(self, w: Workload, finalizers: list[str]) -> None:
        """The workload's finalizers as listed at the start of the pass, changed;
        a workload gone meanwhile needs none."""
        body = {"metadata": {"finalizers": finalizers or None}}
        try:
            self._patch(WORKLOADS, w.name, w.namespace, body)
        except ApiError as err:
            if err.status != 404:
                raise

    def _patch(self, res: Resource, name: str, namespace: str | None, body: JSON) -> None:
        path = path_of(res, name, namespace)
        self.objects.server.call("PATCH", path, body=body, content_type=MERGE_PATCH)

    def _write_ultraservers(
        self, servers: Mapping[str, UltraServer], existing: list[JSON], held: list[Any]
    ) -> None:
        by_name = {o["metadata"]["name"]: o for o in existing}
        ns = self.flags.namespace
        stamp = now()
        for us in servers.values():
            obj = by_name.get(us.id)
            if obj is None:
                obj = self.objects.create(ULTRASERVERS, ultraserver_object(us, ns), ns)
            old = obj.get("status") or {}
            status = ultraserver_status(us, held, old, stamp)
            if _differs(old, status, ignore=("healthChangedAt",)):
                self.objects.patch_status(ULTRASERVERS, us.id, status, ns)
            if (old.get("health"), old.get("message")) != (status["health"], status["message"]):
                log.info("%s: %s: %s", us.id, status["health"], status["message"])
                self._event(obj, ULTRASERVER_KIND, status["health"], status["message"])
        for name in by_name:
            if name in servers:
                continue
            if any(h.ultraserver == name for h in held):
                gone = {
                    "health": "Degraded",
                    "message": "none of its nodes publishes devices any more",
                    "nodes": [],
                    "nodeCount": 0,
                }
                self.objects.patch_status(ULTRASERVERS, name, gone, ns)
            else:
                self.objects.delete(ULTRASERVERS, name, namespace=ns)

    def _pods(self, namespaces: set[str]) -> list[JSON]:
        return [p for ns in sorted(namespaces) for p in self.objects.list_all(PODS, namespace=ns)]

    def _apply(
        self, d: Decision, pods: list[JSON], templates: set[tuple[str, str]], stamp: str
    ) -> None:
        w = d.workload
        mine = workload_pods(pods, w.namespace, w.template)
        if d.state == "Deallocating":
            # The template first: the pods' owner makes new ones at once, and
            # a claim made from a template still there could be allocated on
            # devices that still carry the workload's tags.
            self.objects.delete(TEMPLATES, w.template, namespace=w.namespace)
            for pod in mine:
                self.objects.delete(PODS, pod["metadata"]["name"], namespace=w.namespace)
            if FINALIZER in w.finalizers:
                self._set_finalizers(w, [f for f in w.finalizers if f != FINALIZER])
            return
        if d.held and (w.namespace, w.template) not in templates:
            self.objects.create(TEMPLATES, claim_template(w, self.flags.driver_name), w.namespace)
        status = workload_status(d, stamp)
        keep = set(d.nodes)
        restarted = status.get("restartedAt") or ""
        for pod in mine:
            node = (pod.get("spec") or {}).get("nodeName")
            old = restarted and pod["metadata"].get("creationTimestamp", "") < restarted
            if (node and node not in keep) or old:
                log.info("%s: deleting pod %s on %s", w.key, pod["metadata"]["name"], node)
                self.objects.delete(PODS, pod["metadata"]["name"], namespace=w.namespace)
        if _differs(w.status, status, ignore=()):
            self.objects.patch_status(WORKLOADS, w.name, status, w.namespace)
        if (w.status.get("state"), w.status.get("reason")) != (d.state, d.reason):
            log.info("%s: %s (%s): %s", w.key, d.state, d.reason, d.message)
            self._event_of(w, d.reason, d.message)

    def _event_of(self, w: Workload, reason: str, message: str) -> None:
        obj = {
            "metadata": {"name": w.name, "namespace": w.namespace, "uid": w.uid},
        }
        self._event(obj, WORKLOAD_KIND, reason, message)

    def _event(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        meta = obj["metadata"]
        stamp = now()
        event = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": f"{WORKLOADS.group}/{WORKLOADS.version}",
                "kind": kind,
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid", ""),
            },
            "reason": reason,
            "message": message[:1000],
            "type": "Warning" if reason in WARNING_REASONS else "Normal",
            "source": {"component": MANAGED_BY},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self.objects.create(EVENTS, event, meta["namespace"])
        except ApiError as err:
            log.warning("event %s of %s: %s", reason, meta["name"], err)

    def _count(self, decisions: list[Decision], servers: Mapping[str, UltraServer]) -> None:
        states: dict[str, int] = {}
        for d in decisions:
            states[d.state] = states.get(d.state, 0) + 1
        for state in ("Pending", "Allocated", "PartiallyAllocated", "Failed", "Deallocating"):
            self.metrics.workloads.labels(state).set(states.get(state, 0))
        for health in ("Ready", "Degraded"):
            count = sum((us.healthy) == (health == "Ready") for us in servers.values())
            self.metrics.ultraservers.labels(health).set(count)


def _differs(old: Mapping[str, Any], new: Mapping[str, Any], ignore: tuple[str, ...]) -> bool:
    return any(old.get(k) != v for k, v in new.items() if k not in ignore)
