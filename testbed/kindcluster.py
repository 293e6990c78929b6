"""The kind cluster under test (`make kind-e2e`, tests/kind/): the example
checks' `Cluster`, but its node daemons write their CDI specs inside the node
containers, so a spec is read there through the container engine, and the
driver's name and CDI directory are the installed chart's (the node
DaemonSet's flags), which `make kind-aws` changes."""

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from driver.jsontypes import JSON
from driver.node.cdi import spec_path
from testbed.localcluster import Cluster

NAMESPACE = "trainium-dra"
NODE_DAEMONSET = "trainium-dra-node"


@dataclass
class KindCluster(Cluster):
    engine: str
    """podman or docker: kind's node containers are named after their nodes."""

    @property
    def driver(self) -> str:
        return self.daemon_flag("--driver-name")

    def daemon_flag(self, name: str) -> str:
        """The value of a flag the chart gives the node daemon."""
        daemonset = client.AppsV1Api(self.api).read_namespaced_daemon_set(NODE_DAEMONSET, NAMESPACE)
        args: list[str] = daemonset.spec.template.spec.containers[0].args
        (value,) = [a.split("=", 1)[1] for a in args if a.startswith(f"{name}=")]
        return value

    def cdi_spec(self, node: str, claim_uid: str) -> JSON:
        path = spec_path(Path(self.daemon_flag("--cdi-dir")), self.driver, claim_uid)
        done = subprocess.run(
            [self.engine, "exec", node, "cat", str(path)],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert done.returncode == 0, f"{self.engine} exec {node} cat {path}: {done.stderr}"
        spec: JSON = json.loads(done.stdout)
        return spec
