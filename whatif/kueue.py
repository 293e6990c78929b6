"""The Kueue objects a replay through Kueue brings and takes away: a
ResourceFlavor, a ClusterQueue whose quota is the fleet's cores and whose
queueing strategy is the replay's, and the LocalQueue its pods name. Quota is
counted in cores: the cluster's Kueue counts a chip, a server and an
UltraServer asked by extended resource name as their cores (`trainium-dra up
--with-kueue --kueue-quota cores`), so one count covers every job. Jobs of a
priority other than 0 name a WorkloadPriorityClass of that value, which the
replay brings too. Pure: objects out."""

from dataclasses import dataclass
from typing import Final

from driver.jsontypes import JSON
from driver.kubeapi.resources import Resource

API: Final = "kueue.x-k8s.io/v1beta2"
CLUSTER_QUEUES: Final = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues")
LOCAL_QUEUES: Final = Resource("kueue.x-k8s.io", "v1beta2", "localqueues")
FLAVORS: Final = Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors")
WORKLOADS: Final = Resource("kueue.x-k8s.io", "v1beta2", "workloads")
PRIORITY_CLASSES: Final = Resource("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses")
PRIORITY_LABEL: Final = "kueue.x-k8s.io/priority-class"
STRATEGIES: Final = {"strict": "StrictFIFO", "best-effort": "BestEffortFIFO"}
"""`--kueue` value -> the ClusterQueue's queueingStrategy."""
QUEUEING: Final = {"strict": "kueue-strict", "best-effort": "kueue-best-effort"}
"""`--kueue` value -> the offline anchor's matching queueing."""
NAME: Final = "whatif"
"""The replay's flavor, ClusterQueue and LocalQueue."""


@dataclass(frozen=True)
class KueueQueue:
    """The queue a replay puts every job through: `strategy` a key of
    STRATEGIES, quota `cores` of `core_resource`; `priorities` the jobs'
    priorities other than 0, each a WorkloadPriorityClass."""

    strategy: str
    core_resource: str
    cores: int
    priorities: frozenset[int] = frozenset()

    @property
    def queueing(self) -> str:
        return QUEUEING[self.strategy]

    def objects(self, namespace: str) -> list[JSON]:
        classes = [priority_class(p) for p in sorted(self.priorities)]
        return classes + queue_objects(self.strategy, namespace, self.core_resource, self.cores)


def priority_class_name(priority: int) -> str:
    """The WorkloadPriorityClass of jobs of `priority` (not 0)."""
    return f"{NAME}-priority-{priority}" if priority >= 0 else f"{NAME}-priority-minus-{-priority}"


def priority_class(priority: int) -> JSON:
    return {
        "apiVersion": API,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": priority_class_name(priority)},
        "value": priority,
        "description": "a what-if replay's jobs of this trace priority",
    }


def queue_objects(strategy: str, namespace: str, core_resource: str, cores: int) -> list[JSON]:
    """In creation order: flavor, ClusterQueue (only `namespace` may use it)
    and LocalQueue."""
    if strategy not in STRATEGIES:
        raise ValueError(f"--kueue {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    return [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": NAME}},
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": {"name": NAME},
            "spec": {
                "queueingStrategy": STRATEGIES[strategy],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceGroups": [
                    {
                        "coveredResources": [core_resource],
                        "flavors": [
                            {
                                "name": NAME,
                                "resources": [{"name": core_resource, "nominalQuota": str(cores)}],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": NAME, "namespace": namespace},
            "spec": {"clusterQueue": NAME},
        },
    ]
