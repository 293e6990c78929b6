"""The one place the chaos runs inject or clear a simulated hardware fault.

Every injection goes through `set_fault`, so where the simulator's control
endpoint lives (and how it is authenticated) is decided here alone.
"""

from collections.abc import Mapping
from typing import Any

import httpx

FAULTS_PATH = "/sim/v1/faults"


def set_fault(daemon_url: str, fault: Mapping[str, Any], inject: bool = True) -> None:
    """POST (inject) or DELETE (clear) `fault` at the daemon whose HTTP base URL is given."""
    method = "POST" if inject else "DELETE"
    response = httpx.request(method, f"{daemon_url}{FAULTS_PATH}", json=dict(fault), timeout=10.0)
    response.raise_for_status()
