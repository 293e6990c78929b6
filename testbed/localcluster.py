"""The local cluster under test: `trainium-dra up --foreground` as a child of
the test run (it dies with it), and the few reads the example tests share."""

import contextlib
import json
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import yaml
from kubernetes import client

from driver.jsontypes import JSON
from driver.kubeapi.credentials import typed_client
from driver.node.cdi import spec_path
from localsim.controlplane.binaries import Binaries
from localsim.controlplane.children import die_with_parent, trainium_dra_argv
from localsim.controlplane.k8srelease import Release, release_of
from localsim.paths import ClusterPaths
from testbed import waiting

EXAMPLES = Path(__file__).resolve().parents[1] / "deploy" / "examples"
START_TIMEOUT = 300.0
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
T = TypeVar("T")


WEBHOOK_DOWN = "failed calling webhook"
"""What kubectl says when an admission webhook's server does not answer."""
UNSEEN_NAMESPACE = re.compile(
    r'admission webhook "[^"]+" denied the request: Namespace "([^"]+)" not found'
)
"""What kubectl says when a webhook looked a namespace up in its own cache,
which has not yet seen it."""


def webhook_not_ready(stderr: str, manifest: str) -> bool:
    """Whether a refused apply is worth another: a webhook that did not
    answer, or one that has not yet seen a namespace the same manifest
    creates (Kueue's pod webhook reads namespaces from its informer, which
    lags their creation on a loaded machine). A namespace the manifest does
    not create is the manifest's mistake, and fails at once."""
    if WEBHOOK_DOWN in stderr:
        return True
    created = {
        doc["metadata"]["name"]
        for doc in yaml.safe_load_all(manifest)
        if isinstance(doc, dict) and doc.get("kind") == "Namespace"
    }
    return any(name in created for name in UNSEEN_NAMESPACE.findall(stderr))


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 90.0) -> T:
    """The shared poll, with the slower pace a whole local cluster needs."""
    return waiting.wait_for(what, probe, timeout, interval=0.5)


def short_state_dir() -> Path:
    """Unix socket paths are limited to 107 bytes: keep the state dir short."""
    return Path(tempfile.mkdtemp(prefix="tdra-", dir="/tmp"))


def example_file(name: str, release: Release) -> Path:
    """An example's file for the release: its `k8s-<minor>/` variant where the
    example has one (deploy/examples/README.md), else the file itself."""
    path = EXAMPLES / name
    variant = path.parent / f"k8s-{release.minor}" / path.name
    return variant if variant.exists() else path


@dataclass
class Cluster:
    paths: ClusterPaths
    api: client.ApiClient
    kubectl_path: Path
    release: Release
    """What the cluster's apiserver says it is."""

    def kubectl(
        self, *args: str, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.kubectl_path), f"--kubeconfig={self.paths.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=check,
        )

    def apply(self, *files: str) -> None:
        for name in files:
            self.apply_manifest(name, example_file(name, self.release).read_text())

    def apply_manifest(self, name: str, manifest: str) -> None:
        """`kubectl apply` of a manifest, again while an admission webhook is
        not ready for it (`webhook_not_ready`: a Kueue or LeaderWorkerSet
        manager restarting, or behind on the namespaces, on a loaded machine);
        any other refusal fails at once."""

        def applied() -> bool:
            done = self.kubectl("apply", "-f", "-", stdin=manifest, check=False)
            assert done.returncode == 0 or webhook_not_ready(done.stderr, manifest), (
                f"kubectl apply {name}: {done.stderr}"
            )
            return done.returncode == 0

        wait_for(f"{name} applied (an admission webhook was not ready)", applied)

    def delete(self, *files: str) -> None:
        """Delete what the example made and wait until it is gone (namespaces included)."""
        for name in reversed(files):
            self.delete_manifest(name, example_file(name, self.release).read_text())

    def delete_manifest(self, name: str, manifest: str) -> None:
        """`kubectl delete` of a manifest's objects, then wait until none is
        left: through `wait_for`, whose timeout stretches on a loaded machine
        as kubectl's own `--timeout` would not."""
        self.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false", stdin=manifest)

        def gone() -> bool:
            left = self.kubectl(
                "get", "-f", "-", "--ignore-not-found", "-o", "name", stdin=manifest, check=False
            )
            return left.returncode == 0 and not left.stdout.strip()

        wait_for(f"the objects of {name} gone", gone, timeout=180.0)

    def pod(self, namespace: str, name: str) -> JSON | None:
        try:
            pod = client.CoreV1Api(self.api).read_namespaced_pod(name, namespace)
        except client.ApiException as err:
            if err.status == 404:
                return None
            raise
        result: JSON = self.api.sanitize_for_serialization(pod)
        return result

    def running(self, namespace: str, name: str) -> JSON:
        def probe() -> JSON | None:
            pod = self.pod(namespace, name)
            return pod if pod and pod["status"].get("phase") == "Running" else None

        try:
            return wait_for(f"pod {namespace}/{name} Running", probe)
        except AssertionError as err:
            pod = self.pod(namespace, name) or {}
            states = [c["state"] for c in pod.get("status", {}).get("containerStatuses") or []]
            raise AssertionError(f"{err}; container states: {states}") from None

    def job_pods(self, namespace: str, job: str, count: int) -> list[JSON]:
        """The Running pods of an Indexed Job, in completion-index order."""

        def probe() -> list[JSON] | None:
            items = (
                client.CoreV1Api(self.api)
                .list_namespaced_pod(namespace, label_selector=f"job-name={job}")
                .items
            )
            pods: list[JSON] = [self.api.sanitize_for_serialization(p) for p in items]
            running = [p for p in pods if p["status"].get("phase") == "Running"]
            return running if len(running) == count else None

        try:
            pods = wait_for(f"{count} pods of job {namespace}/{job} Running", probe)
        except AssertionError as err:
            raise AssertionError(f"{err}\n{self.job_story(namespace, job)}") from None
        return sorted(pods, key=lambda p: int(p["metadata"]["annotations"][COMPLETION_INDEX]))

    def claim_of(self, pod: JSON) -> JSON:
        """The pod's (first) ResourceClaim, generated or named."""
        statuses = pod["status"].get("resourceClaimStatuses") or []
        entry = pod["spec"]["resourceClaims"][0]
        name = entry.get("resourceClaimName") or statuses[0]["resourceClaimName"]
        claim = client.ResourceV1Api(self.api).read_namespaced_resource_claim(
            name, pod["metadata"]["namespace"]
        )
        result: JSON = self.api.sanitize_for_serialization(claim)
        return result

    def job_story(self, namespace: str, job: str) -> str:
        """What a Job's pods and its namespace's events say, for a test that
        waited on them in vain: each pod's phase, node and conditions, then the
        events in time order."""
        core = client.CoreV1Api(self.api)
        lines = [f"pods of job {namespace}/{job}:"]
        for pod in core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items:
            conditions = ", ".join(
                f"{c.type}={c.status}" + (f" ({c.reason})" if c.reason else "")
                for c in pod.status.conditions or []
            )
            gone = " terminating" if pod.metadata.deletion_timestamp else ""
            lines.append(
                f"  {pod.metadata.name}: {pod.status.phase}{gone} on {pod.spec.node_name}; "
                f"{conditions}"
            )
        events = core.list_namespaced_event(namespace).items
        lines.append(f"events of {namespace}:")
        for e in sorted(events, key=lambda e: str(e.last_timestamp or e.event_time)):
            when = e.last_timestamp or e.event_time
            lines.append(
                f"  {when} {e.involved_object.kind}/{e.involved_object.name} {e.reason}: "
                f"{e.message}"
            )
        return "\n".join(lines)

    def events(self, namespace: str, name: str) -> list[JSON]:
        items = (
            client.CoreV1Api(self.api)
            .list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
            .items
        )
        return [self.api.sanitize_for_serialization(e) for e in items]

    @property
    def driver(self) -> str:
        """The driver name the cluster was started with."""
        spec = json.loads(self.paths.cluster_file.read_text())["spec"]
        return str(spec["driver"])

    def cdi_spec(self, node: str, claim_uid: str) -> JSON:
        """The CDI spec the node daemon wrote for the claim (on this host)."""
        spec: JSON = json.loads(
            spec_path(self.paths.cdi_dir(node), self.driver, claim_uid).read_text()
        )
        return spec

    def cdi_env(self, node: str, claim_uid: str) -> dict[str, str]:
        """The environment the node daemon's CDI spec gives the claim's containers."""
        env = self.cdi_spec(node, claim_uid)["devices"][0]["containerEdits"]["env"]
        return dict(item.split("=", 1) for item in env)

    def sim_control(self, rack: str = "rack-a") -> httpx.Client:
        """A client of the rack daemon's simulator controls (a unix socket)."""
        data = json.loads(self.paths.cluster_file.read_text())
        transport = httpx.HTTPTransport(uds=data["sim_control"][rack])
        return httpx.Client(transport=transport, base_url="http://sim", timeout=10.0)

    def metrics_url(self, rack: str = "rack-a") -> str:
        data = json.loads(self.paths.cluster_file.read_text())
        url: str = data["metrics"][rack]
        return url


def device_attributes(api: client.ApiClient, driver: str) -> dict[tuple[str, str], JSON]:
    """(pool, device) -> the device's attributes, as the slices publish them."""
    slices = client.ResourceV1Api(api).list_resource_slice(field_selector=f"spec.driver={driver}")
    found: dict[tuple[str, str], JSON] = {}
    for item in api.sanitize_for_serialization(slices)["items"]:
        pool = item["spec"]["pool"]["name"]
        for device in item["spec"].get("devices") or []:
            found[(pool, device["name"])] = device.get("attributes") or {}
    return found


def results(claim: JSON) -> list[JSON]:
    found: list[JSON] = claim["status"]["allocation"]["devices"]["results"]
    return found


@contextlib.contextmanager
def running_cluster(*up_args: str, start_timeout: float = START_TIMEOUT) -> Iterator[Cluster]:
    """`trainium-dra up --foreground` with a parent-death signal; stopped on exit."""
    paths = ClusterPaths(short_state_dir())
    log_path = paths.root.parent / f"{paths.root.name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            trainium_dra_argv(["up", "--foreground", f"--state-dir={paths.root}", *up_args]),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,  # noqa: PLW1509
        )
    try:
        deadline = waiting.Deadline(start_timeout)
        while not paths.ready_file.exists():
            if process.poll() is not None or deadline.passed():
                raise AssertionError(
                    f"local cluster did not start:\n{log_path.read_text()[-3000:]}"
                )
            time.sleep(0.5)
        with typed_client(paths.kubeconfig) as api:
            version = client.VersionApi(api).get_code().git_version
            yield Cluster(paths, api, Binaries.locate().kubectl, release_of(version))
    finally:
        process.terminate()
        try:
            process.wait(90)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log_path.unlink(missing_ok=True)
        subprocess.run(
            trainium_dra_argv(["down", f"--state-dir={paths.root}"]),
            capture_output=True,
            check=False,
        )
