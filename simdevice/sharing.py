"""How the cores of a chip share its HBM bandwidth: max-min fair (water-filling).

Cores that want less than an equal share get what they want; the rest split
what is left equally. The cap is rounded down to capacity / j for a whole j so
that workload timings, cached by bandwidth, stay few.
"""

import math
from collections.abc import Sequence


def fair_share(demands: Sequence[float], capacity: float) -> float | None:
    """The bandwidth cap per core when cores want `demands` bytes/s of a memory
    delivering `capacity`; None when everyone gets what they want."""
    if capacity <= 0:
        raise ValueError(f"capacity: must be > 0, got {capacity}")
    if sum(demands) <= capacity:
        return None
    remaining, left = capacity, len(demands)
    for demand in sorted(demands):
        if demand * left > remaining:
            break
        remaining -= demand
        left -= 1
    exact = remaining / left
    return capacity / math.ceil(capacity / exact - 1e-9)
