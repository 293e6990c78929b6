"""Named crash points for the crash-recovery tests.

When the environment variable TRAINIUM_DRA_FAILPOINT names a point, the
daemon SIGKILLs itself on reaching it, exactly as a node losing power or an
OOM kill would stop it between two steps. Unset, `reached` does nothing.
"""

import os
import signal

ENV = "TRAINIUM_DRA_FAILPOINT"
ARMED = os.environ.get(ENV, "")

PREPARE_POINTS = (
    "prepare-after-checkpoint",
    "prepare-after-token",
    "prepare-after-cdi",
)
UNPREPARE_POINTS = (
    "unprepare-after-jobs-cancelled",
    "unprepare-after-checkpoint-dropped",
    "unprepare-after-cdi-removed",
    "unprepare-after-token-removed",
)


def reached(point: str) -> None:
    if point == ARMED:
        os.kill(os.getpid(), signal.SIGKILL)
