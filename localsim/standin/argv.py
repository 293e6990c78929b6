"""The driver's processes as the stand-in cluster runs them: each one's
command line, as its pod in the chart would have it, and the chart values
that go with them.

Pure: a `ClusterSpec`, its `ClusterPaths` and ports in, argv lists out;
`serve.py` starts the processes.
"""

from localsim.clusterspec import ClusterRack, ClusterSpec
from localsim.paths import ClusterPaths


def controller_argv(
    paths: ClusterPaths, spec: ClusterSpec, http_port: int, account: str, namespace: str
) -> list[str]:
    """As the chart runs it: its ServiceAccount's token, the Lease its Role allows."""
    return [
        "controller",
        f"--kubeconfig={paths.controller_kubeconfig}",
        f"--driver-name={spec.driver}",
        f"--profile={spec.profile}",
        f"--lease-namespace={namespace}",
        f"--lease-name={account}",
        "--resync-seconds=60",
        f"--http-address=127.0.0.1:{http_port}",
    ]


OPERATOR_COMPONENT = "ultraserver-operator"
"""The chart's component label (and ServiceAccount) of the UltraServer operator."""


def operator_values(spec: ClusterSpec) -> dict[str, str]:
    """The chart's `--set` values that turn the operator on, where the profile has it."""
    return {"ultraserverOperator.enabled": "true"} if spec.ultraserver_operator else {}


def operator_argv(
    paths: ClusterPaths, spec: ClusterSpec, http_port: int, namespace: str
) -> list[str]:
    """As the chart runs it: its ServiceAccount's token, NeuronUltraServers in `namespace`."""
    return [
        "ultraserver-operator",
        f"--kubeconfig={paths.operator_kubeconfig}",
        f"--driver-name={spec.driver}",
        f"--namespace={namespace}",
        "--resync-seconds=5",
        f"--http-address=127.0.0.1:{http_port}",
    ]


HEARTBEAT_SECONDS = 1.0
"""The chart's `ultraserverOperator.heartbeatSeconds`, which the stand-in's daemons use too."""


def node_daemon_argv(
    paths: ClusterPaths, spec: ClusterSpec, rack: ClusterRack, http_port: int, namespace: str
) -> list[str]:
    """One process serves every node of the rack (multi-node mode), each node
    with its own node-bound token, as each node's daemon pod would have; with
    the UltraServer operator, each node renews its heartbeat Lease in `namespace`."""
    heartbeat = (
        [f"--heartbeat-seconds={HEARTBEAT_SECONDS:g}", f"--heartbeat-namespace={namespace}"]
        if spec.ultraserver_operator
        else []
    )
    return [
        "node",
        f"--kubeconfig={paths.node_kubeconfig_template}",
        f"--driver-name={spec.driver}",
        f"--profile={spec.profile}",
        f"--ultraserver={rack.name}",
        f"--generation={rack.generation}",
        f"--kubelet-root={paths.node_template('k')}",
        f"--state-dir={paths.node_template('s')}",
        f"--cdi-dir={paths.node_template('cdi')}",
        f"--http-address=127.0.0.1:{http_port}",
        f"--sim-control-address=unix:{paths.sim_control_socket(rack.name)}",
        *(f"--node={rack.node_name(i)}={i}" for i in range(rack.nodes)),
        *heartbeat,
    ]
