"""A manager's loopback ports (a module of its own: the pure configuration
builders need them without the process machinery)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ManagerPorts:
    """Webhooks (HTTPS), metrics, health probes, each on 127.0.0.1."""

    webhook: int
    metrics: int
    health: int
