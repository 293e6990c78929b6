"""The running local cluster, on stand-in or real nodes, as `status` and
`top` open it: its spec, an admin client, and the `Daemons` that serve its
metrics. Fails with a message that says what to do when the cluster is not
up, is still starting, or its apiserver does not answer."""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from driver.kubeapi.credentials import typed_client
from localsim.clusterspec import ClusterSpec
from localsim.daemons import Daemons, StandInDaemons
from localsim.paths import ClusterPaths
from localsim.realnodes.daemonpods import PodDaemons
from localsim.state import read_cluster, serve_pid

PROBE_TIMEOUT = 5.0


class NotRunningError(RuntimeError):
    """No usable cluster in the state directory; the message says why."""


@dataclass(frozen=True)
class Running:
    paths: ClusterPaths
    spec: ClusterSpec
    api: client.ApiClient
    daemons: Daemons
    pids: Mapping[str, int] = field(default_factory=dict)
    """Component -> pid, as `serve` recorded them."""
    scheduler_metrics: str | None = None
    """The kube-scheduler's /metrics URL (HTTPS, the admin token authorizes)."""
    controller_metrics: str | None = None
    """The driver's controller's /metrics URL (HTTP, on loopback)."""


@contextmanager
def open_running(paths: ClusterPaths) -> Iterator[Running]:
    if serve_pid(paths) is None:
        raise NotRunningError(
            f"no local cluster running for {paths.root}; start one with `trainium-dra up` "
            "(or `trainium-dra up --real-nodes`)"
        )
    data = read_cluster(paths)
    if not paths.ready_file.exists() or not data:
        raise NotRunningError(
            f"the local cluster in {paths.root} is still starting; `trainium-dra up` "
            f"returns once it is ready (progress in {paths.serve_log})"
        )
    spec = ClusterSpec.from_json(data["spec"])
    with typed_client(Path(data["kubeconfig"])) as api:
        try:
            client.VersionApi(api).get_code(_request_timeout=PROBE_TIMEOUT)
        except (HTTPError, ApiException) as err:
            raise NotRunningError(
                f"the apiserver of the local cluster in {paths.root} does not answer ({err}); "
                f"see {paths.logs}/"
            ) from err
        daemons: Daemons = (
            PodDaemons(api) if "real_nodes" in data else StandInDaemons(data["metrics"])
        )
        yield Running(
            paths,
            spec,
            api,
            daemons,
            data.get("pids", {}),
            data.get("scheduler_metrics"),
            data.get("controller_metrics"),
        )
