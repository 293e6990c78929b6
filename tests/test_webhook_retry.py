"""The kind scripts' one retry of a kubectl command an admission webhook must
answer (hack/lib/webhooks.sh): again while the webhook does not answer, never
past another refusal or the time given; and which refusals the Python one
(testbed.localcluster) waits out."""

import subprocess
from pathlib import Path

from testbed.localcluster import WEBHOOK_DOWN, webhook_not_ready

ROOT = Path(__file__).resolve().parent.parent

REFUSING = """#!/bin/bash
# Refuses as a webhook not yet answering does, {refusals} times, then applies.
n=$(( $(cat "$0.count" 2>/dev/null || echo 0) + 1 ))
echo "$n" >"$0.count"
if [ "$n" -le {refusals} ]; then
  echo 'Error from server (InternalError): {message}' >&2
  exit 1
fi
echo "job.batch/first created ($*)"
"""


def retry(
    tmp_path: Path, *, refusals: int, message: str, seconds: int = 60, pattern: str = ""
) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run the function on a fake kubectl; (its result, the calls made)."""
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(REFUSING.format(refusals=refusals, message=message))
    kubectl.chmod(0o755)
    script = f'. {ROOT}/hack/lib/webhooks.sh; while_webhooks_refuse {seconds} "$1" {kubectl} apply'
    result = subprocess.run(
        ["bash", "-c", script, "retry", pattern],
        capture_output=True,
        text=True,
        check=False,
    )
    calls = int((tmp_path / "kubectl.count").read_text())
    return result, calls


def test_a_webhook_not_answering_is_waited_out(tmp_path: Path) -> None:
    result, calls = retry(
        tmp_path,
        refusals=2,
        message='failed calling webhook "mjob.kb.io": connect: connection refused',
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "job.batch/first created (apply)\n"
    assert calls == 3


def test_a_pattern_given_is_waited_out_too(tmp_path: Path) -> None:
    message = 'no matches for kind "LeaderWorkerSet" in version "leaderworkerset.x-k8s.io/v1"'
    result, calls = retry(tmp_path, refusals=1, message=message, pattern="no matches for kind")
    assert result.returncode == 0 and calls == 2, result.stderr


def test_another_refusal_is_final_and_named(tmp_path: Path) -> None:
    message = 'admission webhook "vjob.kb.io" denied the request: spec.parallelism: Invalid'
    result, calls = retry(tmp_path, refusals=5, message=message)
    assert result.returncode == 1 and calls == 1
    assert "denied the request: spec.parallelism" in result.stderr
    assert result.stdout == ""


def test_a_webhook_that_never_answers_fails_after_the_time_given(tmp_path: Path) -> None:
    result, calls = retry(tmp_path, refusals=100, message="failed calling webhook", seconds=0)
    assert result.returncode == 1 and calls == 1
    assert "webhooks did not answer in 0 s" in result.stderr


MANIFEST = """apiVersion: v1
kind: Namespace
metadata:
  name: example-kueue-refused
---
apiVersion: v1
kind: Pod
metadata:
  name: refused
  namespace: example-kueue-refused
"""


def unseen(namespace: str) -> str:
    return (
        'Error from server (NotFound): error when creating "STDIN": admission webhook '
        f'"mpod.kb.io" denied the request: Namespace "{namespace}" not found\n'
    )


def test_the_python_retry_waits_for_a_webhook_to_see_the_manifests_own_namespace() -> None:
    """testbed's `apply_manifest` (the stand-in's and kind tests' examples):
    a webhook not answering, or not yet seeing a namespace the same manifest
    creates, is worth another apply; a namespace the manifest does not
    create, or any other refusal, is not."""
    assert webhook_not_ready(f"Error: {WEBHOOK_DOWN} x", MANIFEST)
    assert webhook_not_ready(unseen("example-kueue-refused"), MANIFEST)
    assert not webhook_not_ready(unseen("somewhere-else"), MANIFEST)
    assert not webhook_not_ready('admission webhook "vpod.kb.io" denied the request: no', MANIFEST)
