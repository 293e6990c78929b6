"""The collective counters: registered with their labels, counted per claim,
dropped with the claim (pure: a registry, no daemon)."""

from prometheus_client import CollectorRegistry

from driver.node.metrics import DriverMetrics

NAMES = (
    "trainium_dra_node_collectives_total",
    "trainium_dra_node_collective_bytes_total",
    "trainium_dra_node_collective_seconds_total",
)


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in registry.collect()
        for s in family.samples
        if s.name in NAMES
    }


def test_collective_counters_are_per_claim_and_go_with_it() -> None:
    registry = CollectorRegistry()
    metrics = DriverMetrics(registry)
    kinds = {
        family.name: (family.type, family.documentation)
        for family in registry.collect()
        if family.name + "_total" in NAMES
    }
    assert {k: t for k, (t, _) in kinds.items()} == {
        n.removesuffix("_total"): "counter" for n in NAMES
    }
    assert samples(registry) == {}
    claim_a, claim_b = ("uid-a", "team", "a"), ("uid-b", "team", "b")
    metrics.observe_collectives("n0", claim_a, "all-reduce", count=4, size_bytes=4e6, seconds=0.5)
    metrics.observe_collectives("n0", claim_a, "all-reduce", count=2, size_bytes=1e6, seconds=0.25)
    metrics.observe_collectives("n0", claim_a, "all-gather", count=1, size_bytes=8, seconds=1e-6)
    metrics.observe_collectives("n0", claim_b, "permute", count=1, size_bytes=2, seconds=1e-6)
    labels = (("claim", "a"), ("namespace", "team"), ("node", "n0"), ("operation", "all-reduce"))
    got = samples(registry)
    assert got[(NAMES[0], labels)] == 6
    assert got[(NAMES[1], labels)] == 5e6
    assert got[(NAMES[2], labels)] == 0.75
    assert len(got) == 3 * 3  # a's two operations and b's one, three counters each
    metrics.forget_claim("n0", "uid-a")
    assert {dict(k[1])["claim"] for k in samples(registry)} == {"b"}
    metrics.forget_claim("n0", "uid-unknown")  # a claim that timed nothing
    metrics.forget_claim("n0", "uid-b")
    assert samples(registry) == {}
