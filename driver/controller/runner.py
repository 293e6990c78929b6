"""The running controller: serve /metrics and probes, wait for the Lease,
prime the stores, start the workers and the resync timer, and let kopf feed
the stores from watches."""

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import replace
from functools import partial

import kopf
from kubernetes import client
from prometheus_client import CollectorRegistry

from driver.controller.claimstatus import ClaimStatusWriter, StatusConflictError
from driver.controller.flags import Flags
from driver.controller.handlers import claims_of_rack, racks_for_nodes, register
from driver.controller.lease import LeaseElector
from driver.controller.metrics import ControllerMetrics
from driver.controller.probes import ReplicaState, Role, report
from driver.controller.reconciler import ConflictError, Reconciler
from driver.controller.sliceindex import SliceIndex
from driver.controller.slices import MANAGED, left_by_another_driver
from driver.controller.slicewatch import SliceWatch
from driver.controller.stores import Stores, claim_devices
from driver.controller.workloadwatch import WorkloadWatch
from driver.devicemodel.rackguard import Allocation, RackHold, occupancy
from driver.httpendpoint import HTTPEndpoint, Reply, json_reply, metrics_reply, split_address
from driver.kopfrun import kopf_login, run_kopf
from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import CLAIMS, HEALTH, NODES, SLICES, ULTRASERVERS
from driver.names import rack_label
from driver.workqueue import WorkQueue

log = logging.getLogger(__name__)
MAX_BACKOFF = 30.0
SETTLE_SECONDS = 10.0
"""kopf lists each kind within seconds of starting; the first resync comes
this soon, to forget what was deleted between the priming list and kopf's."""
USER_AGENT = "trainium-dra-controller"
REQUEST_TIMEOUT = 60.0
"""Long enough for the apiserver to store a rack's megabytes of slices."""
SLICE_CHANGE_DELAY = 0.5
"""A slice changed behind our back is usually one of several: wait a little
so one reconcile sees them all."""


class Controller:
    def __init__(self, flags: Flags, configuration: client.Configuration) -> None:
        self.flags = flags
        self.configuration = configuration
        self.objects = Objects(ApiServer(configuration, USER_AGENT, REQUEST_TIMEOUT))
        self.stores = Stores()
        self.queue = WorkQueue()
        self.claim_queue = WorkQueue()
        self.claim_status = ClaimStatusWriter(
            self.objects, flags.driver_name, settle=flags.rack_settle_seconds
        )
        self.registry = CollectorRegistry()
        self.metrics = ControllerMetrics(self.registry)
        self.metrics.pending_work.set_function(
            lambda: self.queue.pending() + self.claim_queue.pending()
        )
        self.slice_index = SliceIndex(rack_label(flags.driver_name))
        self.reconciler = Reconciler(
            self.objects,
            self.stores,
            flags.driver_name,
            self.metrics,
            self.slice_index,
            on_guard=self._guard_moved,
            advertised_racks=flags.advertised_racks,
            on_advertised=self._advertised_moved,
            profile=flags.profile,
            publishing=flags.publishing,
        )
        self.slice_watch = SliceWatch(
            self.objects.server,
            self.slice_index,
            {
                "labelSelector": MANAGED,
                "fieldSelector": f"spec.driver={flags.driver_name}",
            },
            on_change=lambda rack: self.queue.add(rack, SLICE_CHANGE_DELAY),
            is_own=self.reconciler.is_own_write,
        )
        # AWS's UltraServer operator's allocations, for the devices' workloadId.
        self.workload_watch = (
            WorkloadWatch(self.objects.server, self.stores.workloads, self._workloads_moved)
            if flags.profile.workload_tags
            else None
        )
        self.elector = LeaseElector(
            self.objects,
            namespace=flags.lease_namespace,
            name=flags.lease_name,
            identity=flags.identity,
            duration_seconds=flags.lease_seconds,
        )
        self.stop = threading.Event()
        self.lost_lease = threading.Event()
        self._failures: dict[str, int] = {}
        self.role: Role = "starting"
        self.primed = False
        self.apiserver_error = ""
        self.threads: list[threading.Thread] = []
        host, port = split_address(flags.http_address, "--http-address")
        self.http = HTTPEndpoint(
            host,
            port,
            {
                ("GET", "/metrics"): lambda _: metrics_reply(self.registry),
                ("GET", "/healthz"): lambda _: self.probe(need_ready=False),
                ("GET", "/readyz"): lambda _: self.probe(need_ready=True),
            },
        )

    def probe(self, need_ready: bool) -> Reply:
        state = ReplicaState(
            role=self.role,
            primed=self.primed,
            dead_threads=[t.name for t in self.threads if not t.is_alive()],
            apiserver_error=self.apiserver_error,
        )
        ok, details = report(state, need_ready)
        return json_reply(200 if ok else 503, details)

    def run(self) -> int:
        """Block until stopped; 1 when the Lease was lost, else 0."""
        self.http.start()
        log.info("serving /metrics, /healthz and /readyz on port %d", self.http.port)
        try:
            return self._run()
        finally:
            self.http.stop()

    def _run(self) -> int:
        log.info(
            "waiting for lease %s/%s as %s",
            self.flags.lease_namespace,
            self.flags.lease_name,
            self.flags.identity,
        )
        while not self._try_lease():
            self.role = "standby"
            if self.stop.wait(self.flags.lease_seconds / 3):
                return 0
        self.role = "leader"
        self.metrics.leader.set(1)
        # Writers are joined on exit so each finishes its item; the slice watch
        # only reads, and waiting for its next event would hold the lease.
        writers = [threading.Thread(target=self._renew, name="lease", daemon=True)]
        try:
            self._prime()
            watcher = threading.Thread(
                target=self.slice_watch.run,
                args=(self.stop,),
                name="slice-watch",
                daemon=True,
            )
            writers += [
                threading.Thread(target=self._work, name=f"worker-{i}", daemon=True)
                for i in range(self.flags.workers)
            ]
            writers.append(threading.Thread(target=self._resync, name="resync", daemon=True))
            writers.append(
                threading.Thread(target=self._claim_work, name="claim-status", daemon=True)
            )
            self.threads = [*writers, watcher]
            if self.workload_watch is not None:
                self.threads.append(
                    threading.Thread(
                        target=self.workload_watch.run,
                        args=(self.stop,),
                        name="workload-watch",
                        daemon=True,
                    )
                )
            for t in self.threads:
                t.start()
            self.primed = True
            self._run_kopf()
        finally:
            self.stop.set()
            self.queue.close()
            self.claim_queue.close()
            for t in writers:
                if t.is_alive():
                    t.join(timeout=10)
            if not self.lost_lease.is_set():
                self.elector.release()
            self.metrics.leader.set(0)
        return 1 if self.lost_lease.is_set() else 0

    def _try_lease(self) -> bool:
        """One attempt at the Lease; an apiserver error only makes the standby unready."""
        try:
            held = self.elector.try_acquire()
        except Exception as err:
            self.apiserver_error = str(err).splitlines()[0] if str(err) else type(err).__name__
            log.warning("lease %s: %s", self.flags.lease_name, self.apiserver_error)
            return False
        self.apiserver_error = ""
        return held

    def _prime(self) -> None:
        """Fill the stores before the first reconcile, so none publishes from half a
        picture; the slice and workload watches go on from their lists' versions."""
        self.slice_watch.relist()
        if self.workload_watch is not None:
            self.workload_watch.prime()
        self._relist()
        self._delete_left_by_another_driver()

    def _delete_left_by_another_driver(self) -> None:
        """Once, as the new leader: the chart keeps one Lease across profiles,
        so a controller of another driver name that published for these racks
        has stopped leading, and its slices are left to this one."""
        driver = self.flags.driver_name
        listed = self.objects.list_all(SLICES, MANAGED, f"spec.driver!={driver}")
        names = left_by_another_driver(listed, driver, self.stores.racks.items().keys())
        for name in names:
            self.objects.delete(SLICES, name)
        if names:
            log.info("deleted %d slices another driver left for these racks", len(names))

    def _relist(self) -> None:
        """List every watched kind into its store; queue every rack, any rack that
        is gone, and our claims whose allocation is new or changed."""
        self.stores.nodes.relist(partial(self.objects.list_all, NODES))
        self.stores.health.relist(partial(self.objects.list_all, HEALTH))
        claims = self.stores.claims.relist(partial(self.objects.list_all, CLAIMS))
        gone = self.stores.racks.relist(partial(self.objects.list_all, ULTRASERVERS))
        for rack in self.stores.racks.items().keys() | gone:
            self.queue.add(rack)
        for key in claims:
            allocations = self.stores.claims.get(key) or ()
            if any(drv == self.flags.driver_name for drv, _, _ in allocations):
                self.claim_queue.add(key)

    def _run_kopf(self) -> None:
        registry = kopf.OperatorRegistry()
        register(
            registry,
            self.stores,
            enqueue=self.queue.add,
            enqueue_claim=self.claim_queue.add,
            driver=self.flags.driver_name,
            login=lambda **_: kopf_login(self.configuration),
            rack_claimed=self._rack_claimed,
        )
        run_kopf(registry, self.flags.identity)

    def _work(self) -> None:
        while not self.stop.is_set():
            rack = self.queue.get(timeout=1.0)
            if rack is None:
                continue
            started = time.perf_counter()
            result = "error"
            try:
                self.reconciler.reconcile(rack)
                self._failures.pop(rack, None)
                result = "ok"
            except ConflictError as err:
                result = "conflict"
                log.info("%s; retrying", err)
                self.queue.add(rack, 0.2)
            except Exception:
                self._back_off(self.queue, rack, f"rack {rack}: reconcile")
            finally:
                self.metrics.reconciled(result, time.perf_counter() - started)
                self.queue.done(rack)

    def _claim_work(self) -> None:
        """Device status of claims, one at a time: a write per claim, rarely many at once."""
        while not self.stop.is_set():
            key = self.claim_queue.get(timeout=1.0)
            if key is None:
                continue
            try:
                recheck = self.claim_status.sync(
                    key, self.stores.racks.items(), self._hold_of, self._confirmed_hold_of
                )
                self._failures.pop(key, None)
                if recheck is not None:
                    self.claim_queue.add(key, recheck)
            except StatusConflictError as err:
                log.info("%s; retrying", err)
                self.claim_queue.add(key, 0.2)
            except Exception:
                self._back_off(self.claim_queue, key, f"claim {key}: device status")
            finally:
                self.claim_queue.done(key)

    def _hold_of(self, rack: str) -> RackHold | None:
        """The rack's guard as published, with what the claims hold of the rack
        now: a server claim seen since the rack's last reconcile refuses its
        rack claim at once. Asked only for claims holding a rack device."""
        return self._hold_given(rack, lambda: self.stores.claims.items().values())

    def _confirmed_hold_of(self, rack: str) -> RackHold | None:
        """`_hold_of` with the claims read from the apiserver, not the watch."""
        return self._hold_given(
            rack, lambda: [claim_devices(c) for c in self.objects.list_all(CLAIMS)]
        )

    def _hold_given(
        self, rack: str, claims: Callable[[], Iterable[frozenset[Allocation]]]
    ) -> RackHold | None:
        hold = self.reconciler.holds.get(rack)
        if hold is None:
            return None
        in_use = occupancy(claims(), self.flags.driver_name, rack).servers_in_use
        return replace(hold, servers_in_use=in_use)

    def _rack_claimed(self, rack: str) -> bool:
        hold = self.reconciler.holds.get(rack)
        return hold is not None and hold.claimed_since is not None

    def _workloads_moved(self, nodes: Collection[str]) -> None:
        """The workloadId of these nodes may have changed: reconcile their racks."""
        for rack in racks_for_nodes(self.stores.racks.items(), nodes):
            self.queue.add(rack)

    def _advertised_moved(self, racks: Collection[str]) -> None:
        for rack in racks:
            self.queue.add(rack)

    def _guard_moved(self, rack: str) -> None:
        """The rack's guard changed: its rack claims' conditions may follow."""
        for key in claims_of_rack(self.stores, self.flags.driver_name, rack, rack_device=True):
            self.claim_queue.add(key, 0.0)

    def _back_off(self, queue: WorkQueue, key: str, what: str) -> None:
        """Log the failure being handled and retry `key` later, waiting longer
        each time it fails in a row (racks and claims keep separate counts:
        claim keys hold a slash, rack names cannot)."""
        n = self._failures.get(key, 0) + 1
        self._failures[key] = n
        delay = min(MAX_BACKOFF, 0.5 * 2**n)
        log.exception("%s failed (attempt %d), retrying in %.1fs", what, n, delay)
        queue.add(key, delay)

    def _resync(self) -> None:
        period = min(SETTLE_SECONDS, self.flags.resync_seconds)
        while not self.stop.wait(period):
            period = self.flags.resync_seconds
            try:
                self._relist()
            except Exception as err:
                log.warning("resync: listing failed (%s); reconciling from the watched state", err)
                for rack in self.stores.racks.items():
                    self.queue.add(rack)

    def _renew(self) -> None:
        period = self.flags.lease_seconds / 3
        last_ok = time.monotonic()
        while not self.stop.wait(period):
            try:
                ok = self.elector.try_acquire()
            except Exception as err:
                log.warning("lease renewal failed: %s", err)
                ok = False
            if ok:
                last_ok = time.monotonic()
            elif not ok and time.monotonic() - last_ok >= self.flags.lease_seconds * 2 / 3:
                log.error("lost lease %s; stopping", self.flags.lease_name)
                self.lost_lease.set()
                self.stop.set()
                # kopf stops on SIGTERM; a stop flag would park a thread in its
                # executor and hold up its shutdown.
                os.kill(os.getpid(), signal.SIGTERM)
                return
