"""An example's manifest rewritten for a rack of another size.

The examples are written for one Trn3 Gen2 rack (36 servers of 4 chips). The
real-node cluster is one Trn3 Gen1 UltraServer (4 servers of 16 chips), so a
whole-rack job there has 4 pods, not 36, and a server index the small rack
lacks names the server of the same index modulo its size. Pure text in, text
out: on the rack the examples are written for it changes nothing.
"""

import re

from simdevice.topology import RackSpec, rack_spec

WRITTEN_FOR = rack_spec("trn3-gen2")
"""The rack every example under deploy/examples/ is written for."""

POD_COUNTS = re.compile(
    rf"^(\s*(?:completions|parallelism|minCount): ){WRITTEN_FOR.servers}$", re.M
)
"""One pod per server of the whole rack (whole-rack, gang-rack)."""

RACK_CHIPS = re.compile(rf'("chips": ){WRITTEN_FOR.chips}\b')
"""A workload annotation spread over every chip of the rack."""

RACK_QUOTA = re.compile(rf"^(\s*nominalQuota: ){WRITTEN_FOR.chips}$", re.M)
"""A Kueue queue holding every chip of the rack (kueue-rack-gang, kueue-priority)."""

SERVER_CHIPS = re.compile(rf"^(\s*aws\.amazon\.com/neuron: ){WRITTEN_FOR.chips_per_server}$", re.M)
"""A pod asking for all chips of a server by extended resource."""

SERVER_INDEX = re.compile(r"(serverIndex == )(\d+)")
DEVICE_NAME = re.compile(r"^(\s*device: server)(\d\d)", re.M)


def server_on(rack: RackSpec, server: int) -> int:
    """The server an example's server index stands for on `rack`."""
    return server % rack.servers


def for_rack(text: str, rack: RackSpec) -> str:
    """The manifest `text` with its rack-sized counts and server indexes fitted to `rack`."""
    text = POD_COUNTS.sub(lambda m: f"{m[1]}{rack.servers}", text)
    text = RACK_CHIPS.sub(lambda m: f"{m[1]}{rack.chips}", text)
    text = RACK_QUOTA.sub(lambda m: f"{m[1]}{rack.chips}", text)
    text = SERVER_CHIPS.sub(lambda m: f"{m[1]}{rack.chips_per_server}", text)
    text = SERVER_INDEX.sub(lambda m: f"{m[1]}{server_on(rack, int(m[2]))}", text)
    return DEVICE_NAME.sub(lambda m: f"{m[1]}{server_on(rack, int(m[2])):02d}", text)
