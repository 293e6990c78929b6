"""Pod status the kubelet stand-in reports, as pure functions of the pod.

Shapes follow what the kubelet writes: phase, the four pod conditions and one
status per container (waiting, running or terminated).
"""

import datetime
from collections.abc import Mapping
from typing import Any

from driver.jsontypes import JSON

HOST_IP = "127.0.0.1"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _conditions(ready: bool, started: bool, reason: str, message: str, at: str) -> list[JSON]:
    def cond(kind: str, ok: bool, why: str = "", msg: str = "") -> JSON:
        out: JSON = {"type": kind, "status": "True" if ok else "False", "lastTransitionTime": at}
        if not ok and why:
            out["reason"], out["message"] = why, msg
        return out

    return [
        cond("PodReadyToStartContainers", started, reason, message),
        cond("Initialized", True),
        cond("ContainersReady", ready, reason, message),
        cond("Ready", ready, reason, message),
    ]


def _container_ids(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(c["name"], c.get("image", "")) for c in pod["spec"]["containers"]]


def running(pod: Mapping[str, Any], restarts: Mapping[str, int] | None = None) -> JSON:
    """Every container started and ready."""
    at = now()
    uid = pod["metadata"]["uid"]
    return {
        "phase": "Running",
        "hostIP": HOST_IP,
        "hostIPs": [{"ip": HOST_IP}],
        "startTime": (pod.get("status") or {}).get("startTime") or at,
        "conditions": _conditions(True, True, "", "", at),
        "containerStatuses": [
            {
                "name": name,
                "image": image,
                "imageID": f"sim://{image}",
                "containerID": f"sim://{uid}/{name}",
                "ready": True,
                "started": True,
                "restartCount": (restarts or {}).get(name, 0),
                "state": {"running": {"startedAt": at}},
            }
            for name, image in _container_ids(pod)
        ],
    }


def waiting(pod: Mapping[str, Any], reason: str, message: str) -> JSON:
    """Containers not started: e.g. a failed NodePrepareResources."""
    at = now()
    return {
        "phase": "Pending",
        "hostIP": HOST_IP,
        "hostIPs": [{"ip": HOST_IP}],
        "startTime": (pod.get("status") or {}).get("startTime") or at,
        "conditions": _conditions(False, False, reason, message, at),
        "containerStatuses": [
            {
                "name": name,
                "image": image,
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": reason, "message": message}},
            }
            for name, image in _container_ids(pod)
        ],
    }


def finished(
    pod: Mapping[str, Any], exit_codes: Mapping[str, int], messages: Mapping[str, str]
) -> JSON:
    """Every container ended: Succeeded when all exited 0, else Failed."""
    at = now()
    uid = pod["metadata"]["uid"]
    ok = all(code == 0 for code in exit_codes.values())
    started = {s["name"]: s for s in (pod.get("status") or {}).get("containerStatuses") or []}
    statuses = []
    for name, image in _container_ids(pod):
        code = exit_codes.get(name, 0)
        since = ((started.get(name) or {}).get("state") or {}).get("running", {}).get("startedAt")
        terminated: JSON = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": since or at,
            "finishedAt": at,
            "containerID": f"sim://{uid}/{name}",
        }
        if messages.get(name):
            terminated["message"] = messages[name]
        statuses.append(
            {
                "name": name,
                "image": image,
                "imageID": f"sim://{image}",
                "containerID": f"sim://{uid}/{name}",
                "ready": False,
                "started": False,
                "restartCount": (started.get(name) or {}).get("restartCount", 0),
                "state": {"terminated": terminated},
            }
        )
    return {
        "phase": "Succeeded" if ok else "Failed",
        "conditions": _conditions(False, False, "PodCompleted", "", at),
        "containerStatuses": statuses,
    }


def event(pod: Mapping[str, Any], node: str, kind: str, reason: str, message: str) -> JSON:
    """A core/v1 Event about the pod, as the kubelet records one."""
    meta = pod["metadata"]
    at = now()
    return {
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
        "reason": reason,
        "message": message,
        "type": kind,
        "source": {"component": "kubelet", "host": node},
        "reportingComponent": "kubelet",
        "reportingInstance": node,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    }
