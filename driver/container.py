"""`trainium-dra workload`: the entry point of a workload container.

It shows what the container runtime injected from the claim's CDI spec, reaches
the node's workload API through the CDI-mounted socket with the claim's token,
optionally runs a simulated workload on the claim's cores, and then holds (a
training process would keep running) until the pod is stopped. Stopped by a
signal, it exits as a process the signal ended would (128 + the signal's
number), so a Job counts a pod stopped mid-run (evicted, drained, deleted) as
failed and replaces it, instead of counting it as completed. Every line it
prints is `key=value`, so tests and users can read it from `kubectl logs`.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from driver.claimendpoint import ClaimEndpoint, ClaimEndpointError, ClaimEndpointUnreachableError
from driver.mainwait import wait_for_stop

SHOWN_ENV = (
    "NEURON_RT_VISIBLE_CORES",
    "NEURON_LOGICAL_NC_CONFIG",
    "NEURON_RT_ULTRASERVER_MODE",
    "NEURON_RT_ULTRASERVER_SERVER_ID",
    "NEURON_RT_ULTRASERVER_NODE_ID",
    "TRAINIUM_DRA_CLAIM_UID",
    "TRAINIUM_DRA_GENERATION",
    "TRAINIUM_DRA_RING",
    "TRAINIUM_DRA_FABRIC_IPS",
)
T = TypeVar("T")
POLL = 0.5
HOLDING = "holding"
ERROR = "error"
"""The keys of the last line the container prints before it holds or fails:
once one is in `kubectl logs`, the logs show all the container has to say."""


def say(key: str, value: Any) -> None:
    print(f"{key}={value}", flush=True)


def run_workload(endpoint: ClaimEndpoint, spec: dict[str, Any], timeout: float) -> None:
    """Start, then wait until the job ends (for `--exit`)."""
    deadline = time.monotonic() + timeout
    job_id = once_up(lambda: endpoint.start(spec), timeout)
    say("job_submitted", job_id)
    job = endpoint.job(job_id)
    while job["state"] in ("queued", "running"):
        if time.monotonic() > deadline:
            raise ClaimEndpointError(f"job {job_id} still {job['state']} after {timeout:.0f}s")
        time.sleep(POLL)
        job = endpoint.job(job_id)
    say("job", json.dumps({k: job.get(k) for k in ("id", "state", "error")}, sort_keys=True))


def once_up(call: Callable[[], T], wait: float) -> T:
    """`call`'s answer once the workload API gives one, for up to `wait` seconds.
    A container can start while the node daemon restarts (its claim was prepared
    before), and a busy daemon can plan a large job for longer than one request
    waits; neither must fail it. Only calls that are safe to repeat come here:
    reading the claim, and `ClaimEndpoint.start`, which never starts a job twice."""
    deadline = time.monotonic() + wait
    waiting = False
    while True:
        try:
            return call()
        except ClaimEndpointUnreachableError as err:
            if time.monotonic() > deadline:
                raise
            if not waiting:
                say("waiting_for_api", err)
                waiting = True
        time.sleep(POLL)


def probe_other_claim(endpoint: ClaimEndpoint, other_uid: str) -> None:
    """Use this claim's token on another claim: the node daemon must refuse."""
    other = ClaimEndpoint(other_uid, endpoint.socket, endpoint.token)
    try:
        other.inspect()
    except ClaimEndpointError as err:
        say("other_claim", f"refused: {err}")
        return
    say("other_claim", "allowed")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="trainium-dra workload", description=__doc__)
    p.add_argument(
        "--spec",
        default=os.environ.get("TRAINIUM_DRA_WORKLOAD"),
        help="JSON workload to run on the claim's cores (default: $TRAINIUM_DRA_WORKLOAD)",
    )
    p.add_argument(
        "--probe-claim",
        default=None,
        metavar="UID",
        help="also try another claim's API with this claim's token (must be refused)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds to wait for the workload to start (a busy node plans a large job "
        "for a while) and, with --exit, to end",
    )
    p.add_argument(
        "--api-wait",
        type=float,
        default=120.0,
        help="seconds to wait for the workload API while the node daemon (re)starts",
    )
    p.add_argument(
        "--exit",
        action="store_true",
        help="wait for the workload to finish and exit, instead of holding until the pod stops",
    )
    args = p.parse_args(argv)
    for name in SHOWN_ENV:
        say(name, os.environ.get(name, ""))
    try:
        spec = json.loads(args.spec) if args.spec else None
        endpoint = ClaimEndpoint.from_environment(os.environ)
        claim = once_up(endpoint.inspect, args.api_wait)
        say("workload_api", "reachable")
        say("claim_cores", ",".join(map(str, claim["visible_cores"])))
        say("claim_devices", ",".join(claim["devices"]))
        if args.probe_claim:
            probe_other_claim(endpoint, args.probe_claim)
        if spec is not None and args.exit:
            run_workload(endpoint, spec, args.timeout)
        elif spec is not None:
            say("job_submitted", once_up(lambda: endpoint.start(spec), args.timeout))
    except (ClaimEndpointError, json.JSONDecodeError) as err:
        say(ERROR, err)
        return 1
    if args.exit:
        return 0
    return hold_until_signalled()


def hold_until_signalled() -> int:
    """Hold until SIGTERM or SIGINT; the exit status of a process that signal
    ended: a workload stopped before it finished has not succeeded."""
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    say(HOLDING, "until the pod stops")
    wait_for_stop(stop)
    say("stopped_by", signal.Signals(received[0]).name)
    return 128 + received[0]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
