"""Where a Python process spends a benchmark's time, by py-spy: record the
running process from outside while the benchmark drives it, then count, for
each function, the share of the samples under one entry point whose stack
holds it. Sampling from outside changes nothing in the process, but it takes
CPU, so a profile is recorded in a pass of its own, never while timing."""

import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Final

PY_SPY: Final = Path(sys.executable).parent / "py-spy"
RATE: Final = 500
"""Samples a second: fine enough for calls of a few milliseconds."""
ATTACH_SECONDS: Final = 1.0
PREPARE_HANDLER: Final = "dra_handler.<locals>.prepare"
"""The function our daemon's gRPC service runs for NodePrepareResources."""
TOP: Final = 25
"""Functions kept per profile, by share."""

_LINE = re.compile(r":\d+\)$")


@contextmanager
def recordings(pids: Iterable[int], out_dir: Path, rate: int = RATE) -> Iterator[list[Path]]:
    """py-spy samples every process of `pids`, each into a file of its own in
    `out_dir`, while the block runs; yields the files' paths."""
    with ExitStack() as stack:
        outs = []
        for pid in pids:
            out = out_dir / f"{pid}.txt"
            stack.enter_context(recording(pid, out, rate))
            outs.append(out)
        yield outs


def prepare_profile(outs: Iterable[Path]) -> dict[str, object]:
    """Our prepare handler's profile from the recorded processes' collapsed
    stacks, as the benchmark pages show it."""
    lines = [line for out in outs for line in out.read_text().splitlines()]
    samples, functions = shares_under(lines, PREPARE_HANDLER, TOP)
    return {"root": PREPARE_HANDLER, "rate_hz": RATE, "samples": samples, "functions": functions}


@contextmanager
def recording(pid: int, out: Path, rate: int = RATE) -> Iterator[None]:
    """py-spy samples `pid` into `out` (collapsed stacks) while the block runs."""
    proc = subprocess.Popen(
        [
            str(PY_SPY),
            "record",
            "--pid",
            str(pid),
            "--rate",
            str(rate),
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(ATTACH_SECONDS)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        if not out.exists():
            raise RuntimeError(f"py-spy wrote no profile of pid {pid}: {err.strip()}")


def function_of(frame: str) -> str:
    """A frame without its line: `f (file.py:12)` -> `f (file.py)`."""
    return _LINE.sub(")", frame)


def shares_under(collapsed: Iterable[str], root: str, top: int) -> tuple[int, list[list[object]]]:
    """Samples whose stack passes through a function named `root`, and the
    `top` functions found below it by the share of those samples that hold
    them (inclusive: a caller's share includes its callees')."""
    holding: Counter[str] = Counter()
    samples = 0
    for line in collapsed:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [function_of(f) for f in stack.split(";")]
        starts = [i for i, f in enumerate(frames) if f.startswith(f"{root} (")]
        if not starts:
            continue
        samples += int(count)
        for name in set(frames[starts[0] + 1 :]):
            holding[name] += int(count)
    ranked = [[name, n / samples] for name, n in holding.most_common(top)] if samples else []
    return samples, ranked
