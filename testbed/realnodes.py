"""The real-node cluster under test and what its tests share: where a node's
files are on the host, workload pods that run the driver image, and reading
what their containers printed (through the apiserver and the real kubelet)."""

import base64
import json
import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx
from kubernetes import client

from driver.jsontypes import JSON
from driver.node.durable.checkpoint import Checkpoint
from localsim.clusterspec import ClusterSpec
from localsim.controlplane.binaries import Binaries, NodeBinaries
from localsim.realnodes import cgroups
from localsim.realnodes.plan import RealNode, plan_nodes
from localsim.realnodes.realnodecluster import WORKLOAD_IMAGE
from testbed.localcluster import Cluster, wait_for

DRIVER = "trainium.sim.dev"
NAMESPACE = "trainium-dra"


@dataclass
class RealCluster:
    cluster: Cluster
    nodes: dict[str, RealNode]

    @property
    def api(self) -> client.ApiClient:
        return self.cluster.api

    def kubectl(self, *args: str, check: bool = True) -> str:
        return self.cluster.kubectl(*args, check=check).stdout

    def apply(self, *objects: JSON) -> None:
        """`kubectl apply` of API objects, in order."""
        for obj in objects:
            result = self.cluster.kubectl("apply", "-f", "-", check=False, stdin=json.dumps(obj))
            if result.returncode != 0:
                raise AssertionError(f"kubectl apply {obj['kind']}: {result.stderr}")

    def running(self, namespace: str, name: str) -> JSON:
        return self.cluster.running(namespace, name)

    def logs(self, namespace: str, pod: str) -> dict[str, str]:
        """The `key=value` lines the workload container printed."""
        text = self.kubectl("-n", namespace, "logs", pod)
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def wait_logs(self, namespace: str, pod: str, key: str) -> dict[str, str]:
        def probe() -> dict[str, str] | None:
            lines = self.logs(namespace, pod)
            return lines if key in lines else None

        return wait_for(f"{key}= in the logs of {namespace}/{pod}", probe)

    def cdi_spec(self, node: str, claim_uid: str) -> Path:
        return self.nodes[node].dir("cdi") / f"k8s.{DRIVER}-claim_{claim_uid}.json"

    def checkpoint_claims(self, node: str) -> set[str]:
        """The claims the node's daemon has durably recorded (file and journal)."""
        return set(Checkpoint(self.nodes[node].dir("state") / node / "checkpoint.json").claims)

    def daemon_pods(self) -> list[JSON]:
        pods = client.CoreV1Api(self.api).list_namespaced_pod(
            NAMESPACE, label_selector="app.kubernetes.io/component=node"
        )
        return [self.api.sanitize_for_serialization(p) for p in pods.items]

    def daemon_pod(self, node: str) -> JSON:
        found = [
            p
            for p in self.daemon_pods()
            if p["spec"].get("nodeName") == node and not p["metadata"].get("deletionTimestamp")
        ]
        assert len(found) == 1, f"daemon pods on {node}: {[p['metadata']['name'] for p in found]}"
        return found[0]

    def sim_control(self, node: str) -> httpx.Client:
        """A client of the simulator controls of `node`'s daemon pod, with the chart's token."""
        secret = client.CoreV1Api(self.api).read_namespaced_secret(
            "trainium-dra-node-sim-control", NAMESPACE
        )
        token = base64.b64decode(secret.data["token"]).decode()
        address = self.daemon_pod(node)["status"]["podIP"]
        return httpx.Client(
            base_url=f"http://{address}:8082",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10.0,
        )

    def kubelet_log(self, node: str) -> str:
        return (self.cluster.paths.logs / f"{node}-kubelet.log").read_text(errors="replace")

    def process_pids(self, node: str, needle: str) -> list[int]:
        """Host pids of processes in `node`'s cgroups whose command line holds `needle`."""
        found = []
        for pid in cgroups.pids(self.nodes[node].cgroup):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if needle in cmdline:
                found.append(pid)
        return found

    def containerd_tasks(self, node: str) -> str:
        """`ctr tasks ls` of the node's containerd: the containers it runs now."""
        ctr = NodeBinaries.locate(Binaries.locate()).ctr
        socket = self.nodes[node].containerd_socket
        return subprocess.run(
            [str(ctr), f"--address={socket}", "--namespace=k8s.io", "tasks", "ls"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def kill(self, node: str, needle: str) -> int:
        pids = self.process_pids(node, needle)
        assert pids, f"no process matching {needle!r} on {node}"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        return len(pids)


def real_cluster(cluster: Cluster) -> RealCluster:
    data = json.loads(cluster.paths.cluster_file.read_text())
    spec = ClusterSpec.from_json(data["spec"])
    nodes = {n.name: n for n in plan_nodes(cluster.paths.nodes_dir, spec.racks)}
    return RealCluster(cluster, nodes)


PODMAN_CHAINS = "NETAVARK"
"""podman's iptables chains: the kind lane of `make test` adds and removes them
on the host while the real-node tests run beside it."""
PODMAN_NETNS = "netns-"
"""How podman (netavark) names its containers' network namespaces."""
PODMAN_CGROUP = "libpod"
"""In the cgroup path of every process of a podman container, kind's node
containers (and everything their containerd runs) included."""


def host_state() -> dict[str, str]:
    """Network namespaces, links, mounts, cgroups and iptables rules of the host
    that a real-node cluster could leave behind."""

    def run(*argv: str) -> str:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout

    mounts = [line for line in run("cat", "/proc/self/mounts").splitlines() if "tdra" in line]
    rules = iptables_entries(run("iptables-save"))
    netns = run("ip", "netns", "list").splitlines()
    return {
        "netns": "\n".join(n for n in netns if not n.startswith(PODMAN_NETNS)),
        "links": "\n".join(x for x in run("ip", "-o", "link").splitlines() if "tdra" in x),
        "mounts": "\n".join(mounts),
        "cgroup": str(Path("/sys/fs/cgroup/pids/trainium-dra").exists()),
        "iptables": "\n".join(rules),
        "processes": "\n".join(sorted(_container_processes())),
    }


def _container_processes() -> list[str]:
    """Command lines of containerd shims and pause processes, less those
    inside a podman container (a kind node runs its own containerd)."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            if ("containerd-shim" in args or args.startswith("/pause")) and (
                PODMAN_CGROUP not in (proc / "cgroup").read_text()
            ):
                out.append(args)
        except (OSError, UnicodeDecodeError):
            continue  # not a process, or one that ended while read
    return out


BUILTIN_ACCEPT = re.compile(r"^:(INPUT|FORWARD|OUTPUT|PREROUTING|POSTROUTING) ACCEPT ")
"""A built-in chain left at its default policy: there whether or not anyone
wrote a rule (a table appears, empty, the first time anything on the host
touches it)."""


def iptables_entries(saved: str) -> list[str]:
    """`iptables-save`'s rules and chains, each led by its table, less what
    empty built-in tables show and less podman's chains (pure)."""
    out, table = [], ""
    for line in saved.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith("#") or line == "COMMIT" or BUILTIN_ACCEPT.match(line):
            continue
        elif PODMAN_CHAINS not in line:
            out.append(f"{table} {line}")
    return out


def workload_pod(
    namespace: str,
    name: str,
    template: str,
    args: tuple[str, ...] = (),
    node: str | None = None,
) -> JSON:
    """A pod whose one container runs `trainium-dra workload` from the driver image."""
    spec: JSON = {
        "containers": [
            {
                "name": "main",
                "image": WORKLOAD_IMAGE,
                "imagePullPolicy": "Never",
                "args": ["workload", *args],
                "resources": {"claims": [{"name": "neuron"}]},
            }
        ],
        "resourceClaims": [{"name": "neuron", "resourceClaimTemplateName": template}],
        "terminationGracePeriodSeconds": 5,
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def claim_template(
    namespace: str, name: str, device_class: str, cel: str | None = None, lnc: int | None = None
) -> JSON:
    request: JSON = {"name": "neuron", "exactly": {"deviceClassName": device_class}}
    if cel:
        request["exactly"]["selectors"] = [{"cel": {"expression": cel}}]
    devices: JSON = {"requests": [request]}
    if lnc is not None:
        devices["config"] = [
            {
                "requests": ["neuron"],
                "opaque": {
                    "driver": DRIVER,
                    "parameters": {
                        "apiVersion": f"{DRIVER}/v1alpha1",
                        "kind": "NeuronConfig",
                        "logicalNeuronCore": lnc,
                    },
                },
            }
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": devices}},
    }


def namespace(name: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
