"""The arena cap, observed in glibc itself: threads that allocate at the same
time (ctypes releases the GIL) get arenas of their own unless capped."""

import subprocess
import sys

PROGRAM = """
import ctypes, re, sys, threading
from driver.node.mallocarenas import cap_malloc_arenas
if sys.argv[1] == "capped":
    assert cap_malloc_arenas(2)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def churn():
    for _ in range(20000):
        libc.free(libc.malloc(4096))
threads = [threading.Thread(target=churn) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc.open_memstream.restype = ctypes.c_void_p
buf, size = ctypes.c_char_p(), ctypes.c_size_t()
stream = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
libc.malloc_info(0, ctypes.c_void_p(stream))
libc.fclose(ctypes.c_void_p(stream))
print(len(re.findall(r'<heap nr="', buf.value.decode())))
"""


def arenas(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode], check=True, capture_output=True, text=True
    )
    return int(out.stdout)


def test_capped_threads_share_two_arenas_where_uncapped_ones_spread() -> None:
    assert arenas("uncapped") > 2
    assert arenas("capped") <= 2
