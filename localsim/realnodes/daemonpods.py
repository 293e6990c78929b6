"""The node daemons of a real-node cluster as `top` reads them: the chart's
DaemonSet pods, one per node. Their addresses are pod IPs that change with
every rollout, so each read asks the apiserver which pods run now and fetches
their /metrics through its pod proxy, as `kubectl get --raw` would."""

from dataclasses import dataclass

from kubernetes import client
from kubernetes.client.rest import ApiException

from localsim.clusterspec import ClusterRack
from localsim.controlplane.chart import NAMESPACE, RELEASE
from localsim.daemons import DaemonUnreachableError

SELECTOR = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=node"
PORT_NAME = "metrics"


@dataclass(frozen=True)
class PodDaemons:
    api: client.ApiClient

    def metrics(self, rack: ClusterRack) -> list[str]:
        """The /metrics text of the daemon pod on each node of `rack`."""
        core = client.CoreV1Api(self.api)
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=SELECTOR).items
        running = {
            p.spec.node_name: p
            for p in pods
            if p.status.phase == "Running" and not p.metadata.deletion_timestamp
        }
        texts = []
        for node in rack.node_names():
            pod = running.get(node)
            if pod is None:
                raise DaemonUnreachableError(
                    f"no Running daemon pod on {node}; "
                    f"see `kubectl -n {NAMESPACE} get pods -o wide`"
                )
            port = next(
                p.container_port
                for c in pod.spec.containers
                for p in c.ports or []
                if p.name == PORT_NAME
            )
            name = f"{pod.metadata.name}:{port}"
            try:
                response = core.connect_get_namespaced_pod_proxy_with_path(
                    name, NAMESPACE, "metrics", _preload_content=False
                )
            except ApiException as err:
                raise DaemonUnreachableError(
                    f"/metrics of {NAMESPACE}/{pod.metadata.name} on {node}: "
                    f"{err.status} {err.reason}"
                ) from err
            texts.append(response.data.decode())
        return texts
