"""The cluster an example test runs on: the stand-in rack (36 Trn3 Gen2
servers, a kubelet stand-in per node) or the real-node UltraServer (4 Trn3 Gen1
servers, real kubelets and containerd). The checks are the same on both; what
differs is the rack's size, how faults reach the simulator, and whether a
pod's container really runs and can tell what it was given."""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
from kubernetes import client

from driver.container import ERROR, HOLDING, SHOWN_ENV
from driver.jsontypes import JSON
from driver.node.cdi import host_path
from localsim.clusterspec import ClusterSpec
from localsim.commands.running import open_running
from localsim.commands.top import Sample, parse_all
from simdevice.topology import RackSpec, rack_spec
from testbed.examples.rackscale import for_rack, server_on
from testbed.localcluster import Cluster, example_file, wait_for

BUSY = 0.01
"""Utilization above which `trainium-dra top` counts a core busy: it decays
with a 1 s time constant, so a core a finished job used stays above 0 for
minutes."""


@dataclass(frozen=True)
class Target:
    cluster: Cluster
    rack: RackSpec
    sim_control: Callable[[str], httpx.Client]
    """A client of the simulator controls serving a node."""
    containers_run: bool
    """Real kubelets run the pods' containers; the stand-in only reports them Running."""
    daemon_pids: Callable[[str], list[int]] | None = None
    """Host pids of the node daemon serving a node (one per rack on the stand-in)."""

    @property
    def server_cores(self) -> int:
        return self.rack.chips_per_server * self.rack.chip.cores

    def node(self, server: int) -> str:
        """The node of the server an example's server index stands for."""
        return f"rack-a-node-{server_on(self.rack, server)}"

    def server(self, server: int) -> str:
        """The device name of that server (`serverNN`)."""
        return f"server{server_on(self.rack, server):02d}"

    def manifest(self, name: str) -> str:
        """The example file for the cluster's release, fitted to its rack."""
        return for_rack(example_file(name, self.cluster.release).read_text(), self.rack)

    def apply(self, *files: str) -> None:
        for name in files:
            self.cluster.apply_manifest(name, self.manifest(name))

    def delete(self, *files: str) -> None:
        """Delete what the example made and wait until it is gone (namespaces included)."""
        for name in reversed(files):
            self.cluster.delete_manifest(name, self.manifest(name))

    def seen(self, pod: JSON) -> dict[str, str]:
        """The environment the node daemon's CDI spec gives the pod's claim; where
        containers run, also what the container printed of it, which must agree."""
        claim = self.claim_of(pod)
        env = self.cluster.cdi_env(pod["spec"]["nodeName"], claim["metadata"]["uid"])
        if self.containers_run:
            shown = self.printed(pod)
            assert ERROR not in shown, shown
            assert {k: shown[k] for k in SHOWN_ENV} == {k: env.get(k, "") for k in SHOWN_ENV}
        return env

    def claim_of(self, pod: JSON) -> JSON:
        """The pod's claim: its own, or the one made for its extended resource requests."""
        extended = (pod["status"].get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if pod["spec"].get("resourceClaims") or not extended:
            return self.cluster.claim_of(pod)
        found = client.ResourceV1Api(self.cluster.api).read_namespaced_resource_claim(
            extended, pod["metadata"]["namespace"]
        )
        claim: JSON = self.cluster.api.sanitize_for_serialization(found)
        return claim

    def printed(self, pod: JSON) -> dict[str, str]:
        """The `key=value` lines the pod's container printed, once it holds or failed."""
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]

        def lines() -> dict[str, str] | None:
            text = self.cluster.kubectl("-n", namespace, "logs", name, check=False).stdout
            found = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
            return found if HOLDING in found or ERROR in found else None

        return wait_for(f"the container of {namespace}/{name} to say what it got", lines)

    def nccom_test(self, pod: JSON, *argv: str) -> str:
        """`nccom-test ARGV` in the pod's container, its output. Where no
        container runs (the stand-in), the installed command on the host with
        the claim's CDI environment, its socket and token at their host paths:
        the same requests on the same workload API socket."""
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        if self.containers_run:
            done = self.cluster.kubectl(
                "-n", namespace, "exec", name, "--", "nccom-test", *argv, check=False
            )
        else:
            claim = self.claim_of(pod)
            node, uid = pod["spec"]["nodeName"], claim["metadata"]["uid"]
            spec_file = (
                self.cluster.paths.cdi_dir(node) / f"k8s.{self.cluster.driver}-claim_{uid}.json"
            )
            edits = json.loads(spec_file.read_text())["devices"][0]["containerEdits"]
            env = dict(item.split("=", 1) for item in edits["env"])
            for key in ("TRAINIUM_DRA_WORKLOAD_SOCKET", "TRAINIUM_DRA_TOKEN_FILE"):
                env[key] = str(host_path(edits["mounts"], env[key]))
            done = subprocess.run(
                [str(Path(sys.executable).parent / "nccom-test"), *argv],
                env={"PATH": os.environ["PATH"], **env},
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            )
        assert done.returncode == 0, f"nccom-test in {namespace}/{name}: {done.stderr}"
        return done.stdout

    def sample(self) -> Sample:
        """Per-core utilization of every node, as `trainium-dra top` reads it."""
        with open_running(self.cluster.paths) as running:
            return parse_all(running.daemons.metrics(running.spec.racks[0]))

    def busy_cores(self, node: str) -> list[int] | None:
        busy = [c for c, v in self.sample().cores.get(node, {}).items() if v > BUSY]
        return busy or None


def rack_of(cluster: Cluster) -> RackSpec:
    """The generation of the cluster's (one) rack, as `trainium-dra up` recorded it."""
    spec = ClusterSpec.from_json(json.loads(cluster.paths.cluster_file.read_text())["spec"])
    return rack_spec(spec.racks[0].generation)
