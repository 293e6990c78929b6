"""Where the kube-scheduler's CPU goes: a pprof CPU profile taken while a run
schedules its pods, cut into the parts of the DRA allocator we suspect.

The scheduler serves `/debug/pprof/profile` once started with
`--profiling=true`; the profile is summarised with `go tool pprof -top -cum`
(the Go toolchain that builds the control plane). Shares are of the samples
taken, so other load on the machine changes them little.
"""

import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import httpx

PARTS: Final = {
    "DRA Filter": "(*DynamicResources).Filter",
    "pool gathering": ".GatherPools",
    "node selectors": ".NodeMatches",
    "slice conversion": "Convert_v1_ResourceSlice_To_api_ResourceSlice",
    "device selectors (CEL)": ".selectorsMatch",
    "counter validation": ".validateDeviceCounterConsumption",
    "counter checks": ".checkAvailableCounters",
    "garbage collection": "runtime.gcBgMarkWorker",
}
"""Part name -> a piece of the Go function name whose cumulative share counts
for it (the largest share among matching functions: each part exists in the
stable, incubating and experimental allocators, and one of them runs)."""
TOP_FLAT: Final = 8
"""Functions listed by their own (flat) share."""

_ROW = re.compile(r"^\s*\S+\s+([\d.]+)%\s+[\d.]+%\s+\S+\s+([\d.]+)%\s+(.+?)\s*$")


@dataclass(frozen=True)
class ProfileRow:
    flat_percent: float
    cum_percent: float
    function: str


@dataclass
class ProfileCapture:
    """A profile request running in the background for `seconds`."""

    path: Path
    seconds: int
    error: list[str] = field(default_factory=list)
    thread: threading.Thread | None = None

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()
        if self.error:
            raise RuntimeError(f"scheduler profile {self.path.name}: {self.error[0]}")


def parse_top(text: str) -> list[ProfileRow]:
    """The function rows of `go tool pprof -top` output, in its order."""
    rows = []
    for line in text.splitlines():
        match = _ROW.match(line)
        if match:
            rows.append(ProfileRow(float(match[1]), float(match[2]), match[3]))
    return rows


def summarize_rows(rows: list[ProfileRow]) -> dict[str, object]:
    """Cumulative share of each part and the largest flat shares."""
    parts = {
        name: max((r.cum_percent for r in rows if piece in r.function), default=0.0)
        for name, piece in PARTS.items()
    }
    flat = sorted(rows, key=lambda r: r.flat_percent, reverse=True)[:TOP_FLAT]
    return {
        "parts_cum_percent": parts,
        "top_flat": [{"function": r.function, "flat_percent": r.flat_percent} for r in flat],
    }


def go_tool() -> str:
    found = shutil.which("go") or next(
        (p for p in ("/usr/local/go/bin/go",) if Path(p).exists()), None
    )
    if found is None:
        raise SystemExit(
            "--profile-seconds: needs the Go toolchain (go tool pprof) on PATH; "
            "run without --profile-seconds or install Go"
        )
    return found


def start_capture(url: str, token: str, seconds: int, path: Path) -> ProfileCapture:
    """Ask the scheduler at `url` for a CPU profile of the next `seconds`."""
    capture = ProfileCapture(path, seconds)

    def fetch() -> None:
        try:
            response = httpx.get(
                f"{url}/debug/pprof/profile",
                params={"seconds": seconds},
                headers={"Authorization": f"Bearer {token}"},
                verify=False,  # the scheduler's self-signed loopback serving cert
                timeout=seconds + 60,
            )
            response.raise_for_status()
            path.write_bytes(response.content)
        except httpx.HTTPError as err:
            capture.error.append(str(err))

    capture.thread = threading.Thread(target=fetch, daemon=True)
    capture.thread.start()
    return capture


def summarize(path: Path) -> dict[str, object]:
    """Summarise a stored profile with `go tool pprof`."""
    text = subprocess.run(
        [go_tool(), "tool", "pprof", "-top", "-cum", "-nodecount=400", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return summarize_rows(parse_top(text))
