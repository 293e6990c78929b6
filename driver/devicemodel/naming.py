"""Device and counter names of one rack: DNS labels a person can read.

The controller publishes these names; nothing parses them back (the node
daemon reads device attributes instead), so they may change without breaking
allocations, but not without renaming every published device.
"""

from typing import Final


def pair_counter(local_chip: int, first_core: int) -> str:
    """The fine counter of the core pair starting at `first_core`."""
    return f"chip{local_chip:02d}-cores{first_core}-{first_core + 1}"


def server_name(server: int) -> str:
    return f"server{server:02d}"


def chip_name(server: int, local_chip: int) -> str:
    return f"{server_name(server)}-chip{local_chip:02d}"


def partition_name(server: int, local_chip: int, start: int, count: int) -> str:
    base = chip_name(server, local_chip)
    return f"{base}-core{start}" if count == 1 else f"{base}-cores{start}-{start + count - 1}"


ULTRASERVER_DEVICE: Final = "ultraserver"


def server_pool(rack: str, server: int) -> str:
    """The pool of one server in the `node` pool layout: `<rack>/<server>`
    (pool names are DNS subdomains joined by slashes)."""
    return f"{rack}/{server_name(server)}"


def rack_of_pool(pool: str) -> str:
    """The UltraServer a pool belongs to, in either pool layout."""
    return pool.split("/", 1)[0]
