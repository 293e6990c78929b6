"""The one place the chaos runs inject or clear a simulated hardware fault.

Every injection goes through `set_fault`, so where the simulator's control
endpoint lives (and how it is authenticated) is decided here alone.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

FAULTS_PATH = "/sim/v1/faults"


def set_fault(sim_control: Path, fault: Mapping[str, Any], inject: bool = True) -> None:
    """POST (inject) or DELETE (clear) `fault` on the daemon's simulator-control socket."""
    method = "POST" if inject else "DELETE"
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sim_control)), timeout=10.0) as http:
        response = http.request(method, f"http://sim{FAULTS_PATH}", json=dict(fault))
    response.raise_for_status()
