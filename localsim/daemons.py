"""Where `top` reads a rack's node daemon metrics. Stand-in and real nodes
serve them differently: the stand-in runs one daemon process per rack on a
loopback port it records in cluster.json; real nodes run one daemon pod per
node (`localsim.realnodes.daemonpods`). `top` sees only `Daemons`."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import httpx

from localsim.clusterspec import ClusterRack


class DaemonUnreachableError(RuntimeError):
    """A daemon of the rack is not running or its /metrics failed; says which."""


class Daemons(Protocol):
    def metrics(self, rack: ClusterRack) -> list[str]:
        """The /metrics texts of every daemon serving `rack`'s nodes."""
        ...


@dataclass(frozen=True)
class StandInDaemons:
    urls: Mapping[str, str]
    """Rack -> its daemon's /metrics URL, as `serve` recorded it."""

    def metrics(self, rack: ClusterRack) -> list[str]:
        url = self.urls[rack.name]
        try:
            response = httpx.get(url, timeout=5.0)
            response.raise_for_status()
        except httpx.HTTPError as err:
            raise DaemonUnreachableError(f"metrics of {rack.name} at {url}: {err}") from err
        return [response.text]
