"""`make demo`: start the local cluster (if it is not running), run the demo
training job, show where it landed and a few seconds of live utilization,
and leave everything running.

Run as `python -m localsim.commands.demo [trainium-dra up flags]`.
"""

import subprocess
import sys
import time
from collections.abc import Callable

from kubernetes import client

from driver.container import ERROR, HOLDING
from driver.kubeapi.credentials import typed_client
from localsim.clusterspec import ClusterSpec
from localsim.commands import top
from localsim.commands.flags import parse_up
from localsim.commands.hints import EXAMPLES, example
from localsim.commands.status import render
from localsim.commands.up import start_background, usage_lines
from localsim.controlplane.binaries import Binaries
from localsim.paths import ClusterPaths

DEMO = EXAMPLES / "demo-job"
REAL_NODES_DEMO = EXAMPLES / "whole-chip"
NAMESPACE = "demo"
WORKERS = 4
RUN_TIMEOUT = 120.0
LOGS_TIMEOUT = 60.0


def shown_all(logs: str) -> bool:
    """Whether the workload container has printed its last line (before it
    holds, or its error): Ready comes before the container writes anything."""
    return any(line.partition("=")[0] in (HOLDING, ERROR) for line in logs.splitlines())


def wait_for_logs(
    read: Callable[[], str], timeout: float = LOGS_TIMEOUT, interval: float = 0.5
) -> str:
    """Read the logs until they show all the container has to say."""
    deadline = time.monotonic() + timeout
    while not shown_all(logs := read()):
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the container printed no {HOLDING}= or {ERROR}= line in {timeout:.0f}s; "
                f"its logs so far: {logs.strip() or '(none)'}"
            )
        time.sleep(interval)
    return logs


def real_nodes_demo(kubectl: list[str], paths: ClusterPaths, spec: ClusterSpec) -> int:
    """One whole chip for a real container: what it sees, through the real kubelet."""
    print(f"\n== applying {example(REAL_NODES_DEMO)} (a pod on a whole chip)")
    subprocess.run([*kubectl, "apply", "-f", str(REAL_NODES_DEMO)], check=True)
    namespace = ["-n", "example-whole-chip"]
    waited = subprocess.run(
        [*kubectl, *namespace, "wait", "pod/train", "--for=condition=Ready", "--timeout=180s"],
        check=False,
    )
    subprocess.run([*kubectl, *namespace, "get", "pods", "-o", "wide"], check=False)
    if waited.returncode != 0:
        subprocess.run([*kubectl, *namespace, "describe", "pod", "train"], check=False)
        return 1

    def read() -> str:
        argv = [*kubectl, *namespace, "logs", "train"]
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout

    try:
        logs = wait_for_logs(read)
    except TimeoutError as err:
        print(err, file=sys.stderr)
        return 1
    print("\n== what the container sees (kubectl logs, through the node's kubelet)\n")
    print(logs, end="")
    print("\nThe cluster keeps running.")
    more = [
        "kubectl -n trainium-dra get pods -o wide     # the chart's pods on real nodes",
        "kubectl get resourceslices                   # published by the controller pod",
        f"kubectl delete -f {example(REAL_NODES_DEMO)}   # the kubelet unprepares",
    ]
    print("\n".join(usage_lines(paths, spec, more)))
    return 0


def main(argv: list[str]) -> int:
    flags = parse_up(argv)
    paths, spec = flags.paths, flags.spec
    if (started := start_background(argv, flags)) != 0:
        return started
    kubectl = [str(Binaries.locate().kubectl), f"--kubeconfig={paths.kubeconfig}"]
    if flags.settings.real_nodes:
        return real_nodes_demo(kubectl, paths, spec)
    print(f"\n== applying the demo job ({example(DEMO)})")
    subprocess.run([*kubectl, "apply", "-f", str(DEMO)], check=True)
    with typed_client(paths.kubeconfig) as api:
        core = client.CoreV1Api(api)
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            pods = core.list_namespaced_pod(NAMESPACE).items
            running = [p for p in pods if p.status.phase == "Running"]
            if len(running) == WORKERS:
                break
            if time.monotonic() > deadline:
                print(f"demo pods not Running after {RUN_TIMEOUT:.0f}s:", file=sys.stderr)
                subprocess.run([*kubectl, "-n", NAMESPACE, "get", "pods,events"], check=False)
                return 1
            time.sleep(0.5)
        subprocess.run([*kubectl, "-n", NAMESPACE, "get", "pods", "-o", "wide"], check=False)
        print("\n== where it runs (trainium-dra status)\n")
        print(render(paths, spec, api))
    rack = spec.racks[0].name
    print(f"\n== live utilization of {rack} (trainium-dra top), 5 s\n")
    time.sleep(1.0)  # one full utilization window with the jobs running
    top.main([f"--state-dir={paths.root}", f"--rack={rack}", "--iterations=5"])
    print("\nThe cluster keeps running.")
    more = [f"kubectl delete -f {example(DEMO)}   # remove the demo job"]
    print("\n".join(usage_lines(paths, spec, more)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
