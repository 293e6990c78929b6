"""The Kubernetes objects of one job: a ResourceClaim and a Pod per pod, and
for a gang a PodGroup that makes the scheduler bind all of its pods or none.
Asked as Neuron-style requests, a pod of cores or chips names an extended
resource in its limits instead of a claim of its own. Put through Kueue, a
pod carries its LocalQueue (and its job's WorkloadPriorityClass, if any) and
a gang is one Kueue pod group, so Kueue admits the job whole."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from driver.jsontypes import JSON
from whatif.jobs import Job
from whatif.kueue import PRIORITY_LABEL, priority_class_name

DEVICE_CLASSES: Final = {
    "cores": "core",
    "chips": "chip",
    "server": "server",
    "rack": "ultraserver",
}
"""Shape kind -> the chart's DeviceClass prefix (`<prefix>.<driver>`)."""
JOB_LABEL: Final = "whatif.trainium.sim.dev/job"
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
GROUP_LABEL: Final = "kueue.x-k8s.io/pod-group-name"
GROUP_COUNT: Final = "kueue.x-k8s.io/pod-group-total-count"
IMAGE: Final = "registry.invalid/trainium-whatif:none"
"""Never pulled: the pods hold their devices and the replay ends them."""


@dataclass(frozen=True)
class PodStyle:
    """How the replay's pods ask: `extended` maps a shape kind (`cores`,
    `chips`, and through Kueue `server` and `rack`) to the extended resource
    its pods name, as many as the shape's count; `scheduler` is the profile
    that places them (None: the default scheduler); `queue` the Kueue
    LocalQueue they wait in (None: straight to the scheduler)."""

    extended: Mapping[str, str] = field(default_factory=dict)
    scheduler: str | None = None
    queue: str | None = None

    def resource(self, job: Job) -> str | None:
        return self.extended.get(job.shape.kind)


CLAIMS: Final = PodStyle()
"""Every pod a claim of its own, placed by the default scheduler."""


def pod_name(job: Job, index: int, attempt: int = 0) -> str:
    """Pod `index` of the job's run `attempt` (above 0 after evictions), and its claim."""
    return f"{job.name}-{index}" if attempt == 0 else f"{job.name}-r{attempt}-{index}"


def claim_pod(claim: Mapping[str, Any]) -> str:
    """The pod a replay claim serves: its namesake, or for the claim the
    scheduler made for a pod's extended resources, its owner."""
    meta = claim["metadata"]
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") == "Pod":
            return str(ref["name"])
    return str(meta["name"])


def claim(job: Job, index: int, namespace: str, driver: str, attempt: int = 0) -> JSON:
    shape = job.shape
    request: JSON = {"deviceClassName": f"{DEVICE_CLASSES[shape.kind]}.{driver}"}
    if shape.kind == "cores":
        attribute = f'device.attributes["{driver}"].coreCount'
        request["selectors"] = [{"cel": {"expression": f"{attribute} == {shape.count}"}}]
    elif shape.kind == "chips" and shape.count > 1:
        request["count"] = shape.count
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": pod_name(job, index, attempt),
            "namespace": namespace,
            "labels": {JOB_LABEL: job.name},
        },
        "spec": {"devices": {"requests": [{"name": "devices", "exactly": request}]}},
    }


def pod(
    job: Job, index: int, namespace: str, gang: bool, *, attempt: int = 0, style: PodStyle = CLAIMS
) -> JSON:
    name = pod_name(job, index, attempt)
    extended = style.resource(job)
    container: JSON = {"name": "main", "image": IMAGE}
    spec: JSON = {"containers": [container], "terminationGracePeriodSeconds": 0}
    meta: JSON = {"name": name, "namespace": namespace, "labels": {JOB_LABEL: job.name}}
    if extended:
        container["resources"] = {"limits": {extended: str(job.shape.count)}}
    else:
        container["resources"] = {"claims": [{"name": "d"}]}
        spec["resourceClaims"] = [{"name": "d", "resourceClaimName": name}]
    if style.scheduler:
        spec["schedulerName"] = style.scheduler
    if gang:
        spec["schedulingGroup"] = {"podGroupName": job.name}
    if style.queue:
        meta["labels"][QUEUE_LABEL] = style.queue
        if job.priority:
            meta["labels"][PRIORITY_LABEL] = priority_class_name(job.priority)
        if job.pods > 1:
            # Kueue's group is one run's pods: a run after an eviction is a new workload.
            meta["labels"][GROUP_LABEL] = pod_name(job, 0, attempt).removesuffix("-0")
            meta["annotations"] = {GROUP_COUNT: str(job.pods)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def pod_group(job: Job, namespace: str) -> JSON:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": job.name, "namespace": namespace, "labels": {JOB_LABEL: job.name}},
        "spec": {"schedulingPolicy": {"gang": {"minCount": job.pods}}},
    }


def job_objects(
    job: Job,
    namespace: str,
    driver: str,
    gangs: bool,
    *,
    attempt: int = 0,
    style: PodStyle = CLAIMS,
) -> list[JSON]:
    """In creation order: the PodGroup (a gang of more than one pod; a run
    after an eviction reuses it), then each pod's claim (unless it asks for an
    extended resource) and the pod."""
    gang = gangs and job.pods > 1
    objects = [pod_group(job, namespace)] if gang and attempt == 0 else []
    for i in range(job.pods):
        if not style.resource(job):
            objects.append(claim(job, i, namespace, driver, attempt))
        objects.append(pod(job, i, namespace, gang, attempt=attempt, style=style))
    return objects
