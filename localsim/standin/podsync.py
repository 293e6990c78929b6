"""The pod half of the kubelet stand-in: what the kubelet does with the pods
bound to its nodes, for DRA.

- A pod bound to one of the nodes: NodePrepareResources for its claims
  (through `KubeletStandIn`), start the containers' simulated workloads with
  their claim's token, then report it Running. A failed prepare becomes a
  Warning Event (`FailedPrepareDynamicResources`) and a waiting container
  status with the error, and is retried with back-off.
- A workload that ends: restartPolicy Always restarts it (restartCount goes
  up); otherwise the pod ends Succeeded or Failed.
- A pod being deleted, or ended: NodeUnprepareResources, then (deleting) the
  final delete with grace period 0, as the kubelet does.
"""

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from driver.claimendpoint import ClaimEndpoint, ClaimEndpointError
from driver.jsontypes import JSON
from driver.kubeapi.apiserver import ApiError, ApiServer
from driver.kubeapi.informer import Informer
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import PODS, path_of
from driver.workqueue import WorkQueue
from localsim.standin import podstatus
from localsim.standin.kubelet import KubeletError, KubeletStandIn, claim_names
from localsim.standin.podwrites import PodWrites, api_reason
from localsim.standin.workloadclient import endpoint_from_edits, workload_spec
from simdevice.workloads import WorkloadError

log = logging.getLogger("trainium-dra.kubelet")


FAILED_PREPARE = "FailedPrepareDynamicResources"
FAILED_UNPREPARE = "FailedUnprepareDynamicResources"
FAILED_CREATE = "CreateContainerError"
BACKOFF_START, BACKOFF_MAX = 1.0, 20.0
TICK = 2.0
STOP_TIMEOUT = 10.0
USER_AGENT = "trainium-dra-kubelet-standin"
REQUEST_TIMEOUT = 30.0
FINISHED_JOB_STATES = ("succeeded", "failed", "cancelled")


@dataclass
class PodRecord:
    """What this stand-in did for one pod."""

    node: str
    claims: list[tuple[str, str, str]] = field(default_factory=list)  # namespace, uid, name
    running: bool = False
    jobs: dict[str, tuple[ClaimEndpoint, str]] = field(default_factory=dict)  # container -> job
    restarts: dict[str, int] = field(default_factory=dict)
    exits: dict[str, tuple[int, str]] = field(default_factory=dict)  # container -> code, message
    failures: int = 0
    retry_at: float = 0.0
    last_error: str = ""


class PodSync:
    """Runs the pods of `kubelets` (node name -> registered stand-in)."""

    def __init__(
        self,
        api: client.ApiClient,
        kubelets: Mapping[str, KubeletStandIn],
        cdi_dirs: Mapping[str, Path],
        workers: int = 8,
    ) -> None:
        server = ApiServer(api.configuration, USER_AGENT, REQUEST_TIMEOUT)
        self.objects = Objects(server)
        self.writes = PodWrites(self.objects)
        self.kubelets = dict(kubelets)
        self.cdi_dirs = dict(cdi_dirs)
        self.workers = workers
        self.queue = WorkQueue()
        self.lock = threading.Lock()
        self.pods: dict[str, JSON] = {}
        self.records: dict[str, PodRecord] = {}
        self.threads: list[threading.Thread] = []
        self.stopping = threading.Event()
        self.pod_informer: Informer[JSON] = Informer(
            server,
            path_of(PODS),
            {},
            dict,
            on_list=self._listed,
            on_event=lambda kind, pod: self._observe(pod, deleted=kind == "DELETED"),
        )

    # --- lifecycle -------------------------------------------------------

    def start(self) -> None:
        targets = [self._watch_loop] + [self._work_loop] * self.workers
        for i, target in enumerate(targets):
            thread = threading.Thread(target=target, name=f"kubelet-{i}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def stop(self) -> None:
        """Let the workers finish their current pod; the pod watch is closed at
        once (a watch left open holds up the apiserver's own shutdown)."""
        self.stopping.set()
        self.pod_informer.close()
        self.queue.close()
        for thread in self.threads[1:]:
            thread.join(STOP_TIMEOUT)

    # --- inputs ----------------------------------------------------------

    def _ours(self, pod: Mapping[str, Any]) -> bool:
        return (pod.get("spec") or {}).get("nodeName") in self.kubelets

    def _observe(self, pod: JSON, deleted: bool = False) -> None:
        uid = pod["metadata"]["uid"]
        with self.lock:
            if deleted or not self._ours(pod):
                if self.pods.pop(uid, None) is None and uid not in self.records:
                    return
            else:
                self.pods[uid] = pod
        self.queue.add(uid)

    def _watch_loop(self) -> None:
        self.pod_informer.run(self.stopping)

    def _listed(self, pods: list[JSON]) -> None:
        """A fresh list: observe every pod, and queue the ones that vanished."""
        present = {p["metadata"]["uid"] for p in pods if self._ours(p)}
        for pod in pods:
            self._observe(pod)
        with self.lock:
            gone = [uid for uid in set(self.pods) | set(self.records) if uid not in present]
            for uid in gone:
                self.pods.pop(uid, None)
        for uid in gone:
            self.queue.add(uid)

    def _work_loop(self) -> None:
        while not self.stopping.is_set():
            uid = self.queue.get(timeout=1.0)
            if uid is None:
                continue
            try:
                self._sync(uid)
            except Exception:  # an API or socket error: try again after a back-off
                log.exception("pod %s: sync failed; retrying", uid)
                with self.lock:
                    record = self.records.get(uid)
                if record is not None:
                    record.failures += 1
                    record.retry_at = time.monotonic() + BACKOFF_MAX
                    record.last_error = record.last_error or "sync failed"
            finally:
                self._again_later(uid)
                self.queue.done(uid)

    def _again_later(self, uid: str) -> None:
        """Queue the pod's next visit: when its back-off ends, or in TICK to
        follow its running workloads."""
        with self.lock:
            record = self.records.get(uid)
        if record is None:
            return
        wait = next_visit(record, time.monotonic())
        if wait is not None:
            self.queue.add(uid, delay=wait)

    # --- one pod -----------------------------------------------------------

    def _sync(self, uid: str) -> None:
        with self.lock:
            pod = self.pods.get(uid)
            record = self.records.get(uid)
        if pod is None:
            if record is not None and self._unprepare(None, record):
                self._forget(uid)
            return
        node = pod["spec"]["nodeName"]
        if record is None:
            record = PodRecord(node)
            with self.lock:
                self.records[uid] = record
        if pod["metadata"].get("deletionTimestamp"):
            if self._unprepare(pod, record):
                self.writes.delete(pod)
                self._forget(uid)
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            if self._unprepare(pod, record):
                record.jobs.clear()
            return
        if record.running:
            self._follow_jobs(pod, record)
            return
        if record.last_error and time.monotonic() < record.retry_at:
            return
        self._start(pod, record)

    def _forget(self, uid: str) -> None:
        with self.lock:
            self.records.pop(uid, None)

    def _start(self, pod: JSON, record: PodRecord) -> None:
        kubelet = self.kubelets[record.node]
        name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        try:
            if claim_names(pod):
                record.claims = kubelet.pod_claims(self.objects, pod)
                edits = kubelet.start_pod(self.objects, pod, self.cdi_dirs[record.node])
            else:
                edits = {}
        except (KubeletError, ApiError) as err:
            message = str(err) if isinstance(err, KubeletError) else api_reason(err)
            self._fail(
                pod, record, FAILED_PREPARE, f"Failed to prepare dynamic resources: {message}"
            )
            return
        try:
            spec = workload_spec(pod["metadata"].get("annotations"))
            if spec is not None:
                for container, container_edits in edits.items():
                    endpoint = endpoint_from_edits(container_edits)
                    if endpoint is not None:
                        record.jobs[container] = (endpoint, endpoint.start(spec))
        except (ClaimEndpointError, WorkloadError) as err:
            record.jobs.clear()  # the daemon cancels them when the claim is unprepared
            self._fail(pod, record, FAILED_CREATE, str(err))
            return
        self.writes.patch_status(pod, podstatus.running(pod, record.restarts))
        record.running, record.last_error, record.failures = True, "", 0
        log.info("pod %s running on %s (%d jobs)", name, record.node, len(record.jobs))

    def _fail(self, pod: JSON, record: PodRecord, reason: str, message: str) -> None:
        record.failures += 1
        record.retry_at = time.monotonic() + min(
            BACKOFF_MAX, BACKOFF_START * 2 ** (record.failures - 1)
        )
        if message == record.last_error:
            return
        record.last_error = message
        log.warning("pod %s/%s: %s", pod["metadata"]["namespace"], pod["metadata"]["name"], message)
        self.writes.event(pod, record.node, "Warning", reason, message)
        self.writes.patch_status(pod, podstatus.waiting(pod, reason, message))

    def _follow_jobs(self, pod: JSON, record: PodRecord) -> None:
        policy = pod["spec"].get("restartPolicy", "Always")
        for container, (endpoint, job_id) in list(record.jobs.items()):
            if container in record.exits:
                continue
            try:
                job = endpoint.job(job_id)
            except (ClaimEndpointError, OSError) as err:
                log.warning("pod %s: job %s: %s", pod["metadata"]["name"], job_id, err)
                continue
            if job["state"] not in FINISHED_JOB_STATES:
                continue
            code = 0 if job["state"] == "succeeded" else 1
            restart = policy == "Always" or (policy == "OnFailure" and code != 0)
            if restart and job["state"] != "cancelled":
                try:
                    spec = workload_spec(pod["metadata"].get("annotations"))
                    if spec is None:
                        continue
                    record.jobs[container] = (endpoint, str(endpoint.submit(spec)["id"]))
                except (ClaimEndpointError, WorkloadError) as err:
                    record.exits[container] = (1, str(err))
                    continue
                record.restarts[container] = record.restarts.get(container, 0) + 1
                self.writes.patch_status(pod, podstatus.running(pod, record.restarts))
            else:
                record.exits[container] = (code, str(job.get("error") or ""))
        if record.exits and set(record.exits) >= {c["name"] for c in pod["spec"]["containers"]}:
            codes = {c: code for c, (code, _) in record.exits.items()}
            messages = {c: msg for c, (_, msg) in record.exits.items()}
            self.writes.patch_status(pod, podstatus.finished(pod, codes, messages))
            record.running = False

    def _unprepare(self, pod: JSON | None, record: PodRecord) -> bool:
        """NodeUnprepareResources for what was prepared; False when it must be retried."""
        if not record.claims:
            return True
        try:
            self.kubelets[record.node].unprepare(record.claims)
        except KubeletError as err:
            if pod is not None and str(err) != record.last_error:
                record.last_error = str(err)
                self.writes.event(pod, record.node, "Warning", FAILED_UNPREPARE, str(err))
            record.failures += 1
            record.retry_at = time.monotonic() + min(BACKOFF_MAX, 2.0**record.failures)
            return False
        record.claims, record.running = [], False
        record.last_error = ""
        return True


def next_visit(record: PodRecord, now: float) -> float | None:
    """Seconds until a pod needs another sync without a new event, or None.

    A failed pod is retried when its back-off ends (every TICK once it is
    overdue); a running pod with workloads is followed every TICK.
    """
    if record.last_error:
        return record.retry_at - now if record.retry_at > now else TICK
    if record.running and record.jobs:
        return TICK
    return None
