"""Device attributes both sides rely on: the controller publishes them on every
device, the node daemon reads them back to find which cores a device gives
its node (devicecores.py; device names are opaque to it). Renaming one breaks
every claim allocated from slices published before the change.
"""

from typing import Final

KIND: Final = "resourceType"  # core | chip | server | ultraserver
ULTRASERVER: Final = "ultraserverId"  # the UltraServer (and pool) name
SERVER_INDEX: Final = "serverIndex"
CHIP_INDEX: Final = "chipIndex"  # on its server
CORE_START: Final = "coreStart"  # first physical core on its chip
CORE_COUNT: Final = "coreCount"
