"""The nccom-test example: nccom-test in each pod's container is answered by
the node daemon on the pod's own chips, and across two pods on two servers
when one names the other's chips; the printed busbw is the model's, computed
here from the chips the node's CDI spec gives each claim."""

from simdevice.collectives import time_collective
from simdevice.fabric import rank_places
from testbed.examples.manifests import node_of
from testbed.examples.target import Target

GIB = float(1 << 30)
SIZES = [1 << 20, 1 << 25, 1 << 30]
SWEEP = ("-b", "1M", "-e", "1G", "-f", "32", "--show-algorithm")


def printed(out: str) -> list[tuple[int, float, str]]:
    """size, busbw and algorithm of each row nccom-test printed."""
    lines = out.strip().splitlines()
    assert lines[0].split()[-2:] == ["busbw(GB/s)", "algorithm"], out
    assert lines[-1].startswith("Avg bus bandwidth:"), out
    return [(int(c[0]), float(c[5]), c[6]) for c in (line.split() for line in lines[1:-1])]


def model(target: Target, chips: list[int]) -> list[tuple[int, float, str]]:
    places = rank_places(target.rack, [(0, c) for c in chips])
    timings = [time_collective("all-reduce", target.rack, places, s) for s in SIZES]
    return [(int(t.size), round(t.busbw / GIB, 2), t.algorithm) for t in timings]


def test_nccom_test_on_one_server_and_across_two(target: Target) -> None:
    files = ("nccom-test/nccom-test.yaml",)
    target.apply(*files)
    try:
        one, rank0, rank1 = (
            target.cluster.running("example-nccom-test", name)
            for name in ("one-server", "rank-0", "rank-1")
        )
        assert node_of(rank0) != node_of(rank1)
        rings = [
            [int(c) for c in target.seen(pod)["TRAINIUM_DRA_RING"].split(",")]
            for pod in (one, rank0, rank1)
        ]
        assert all(len(ring) == 4 for ring in rings), rings
        alone = printed(target.nccom_test(one, "-r", "4", *SWEEP, "allr"))
        assert alone == model(target, rings[0])
        peers = ",".join(map(str, rings[2]))
        gang = printed(target.nccom_test(rank0, "-r", "8", "--peers", peers, *SWEEP, "allr"))
        assert gang == model(target, rings[1] + rings[2])
        assert {row[2] for row in gang} == {"hier"}
        assert gang[-1][1] > alone[-1][1]  # the inter-server links are the faster level
    finally:
        target.delete(*files)
