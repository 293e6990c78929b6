"""The stand-in's model of the kubelet's health staleness rule."""

from types import SimpleNamespace

from testbed.healthcache import HealthCache


def update(device: str, health: int, timeout: int = 30) -> SimpleNamespace:
    ident = SimpleNamespace(pool_name="rack-a", device_name=device)
    return SimpleNamespace(device=ident, health=health, health_check_timeout_seconds=timeout)


def test_a_device_is_unknown_once_its_last_update_is_older_than_its_timeout() -> None:
    cache = HealthCache()
    assert cache.state("rack-a", "chip0", 0.0) == "Unknown"
    cache.ingest([update("chip0", 1), update("chip1", 2)], now=100.0)
    assert cache.state("rack-a", "chip0", 130.0) == "Healthy"
    assert cache.state("rack-a", "chip1", 130.0) == "Unhealthy"
    assert cache.state("rack-a", "chip0", 130.5) == "Unknown"
    cache.ingest([update("chip0", 1)], now=130.5)
    assert cache.state("rack-a", "chip0", 131.0) == "Healthy"
    assert cache.state("rack-a", "chip1", 131.0) == "Unknown"
