"""Cap glibc's malloc arenas before the daemon starts its threads.

glibc gives threads that allocate at the same time arenas of their own, up to
eight per core, and memory freed into an arena is rarely handed back. The
daemon runs gRPC threads (C-core allocates outside the GIL) beside its Python
workers, and each burst of prepares left more memory held in more arenas:
under 1,152 claims a round its resident size kept growing. With two arenas
the growth per round fell several times (docs/reliability.md has the load
run); the GIL serialises almost every allocation anyway.
"""

import ctypes

M_ARENA_MAX = -8
"""mallopt parameter number of M_ARENA_MAX in glibc's malloc.h."""
ARENAS = 2


def cap_malloc_arenas(arenas: int = ARENAS) -> bool:
    """True when glibc took the cap; False on a libc without mallopt (e.g. musl)."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))
