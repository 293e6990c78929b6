"""ServerSim: jobs follow the clock, faults change behaviour, telemetry shows it."""

import pytest

from simdevice.faults import Fault, FaultError, FaultKind
from simdevice.server import JobNotFoundError, ServerSim
from simdevice.topology import rack_spec
from simdevice.workloads import WorkloadError, parse_workload, workload_timing

GEN2 = rack_spec("trn3-gen2")
TRN2 = rack_spec("trn2")
GEMM = parse_workload({"kind": "gemm", "m": 1024, "n": 1024, "k": 1024, "iterations": 1000})
ALL_REDUCE = parse_workload({"kind": "all-reduce", "bytes": 1 << 28, "chips": 144})


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sim(clock: FakeClock) -> ServerSim:
    return ServerSim(GEN2, 5, clock=clock)


def test_server_holds_its_chips(sim: ServerSim) -> None:
    assert [c.index for c in sim.chips] == [20, 21, 22, 23]
    assert [c.local_index for c in sim.chips] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"^server: "):
        ServerSim(GEN2, 36)


def test_job_takes_the_simulated_time_its_timing_says(sim: ServerSim, clock: FakeClock) -> None:
    job_id = sim.submit(GEMM, [(0, 0)])
    expected = workload_timing(GEMM, GEN2, 1, 1).duration
    info = sim.job(job_id)
    assert (info.state, info.started, info.progress) == ("running", 1000.0, 0.0)
    assert info.duration == pytest.approx(expected)
    clock.now += expected / 2
    assert sim.job(job_id).progress == pytest.approx(0.5)
    clock.now += expected
    done = sim.job(job_id)
    assert done.state == "succeeded"
    assert done.finished == pytest.approx(1000.0 + expected)
    assert done.progress == 1.0


def test_time_spent_planning_is_not_the_jobs(sim: ServerSim, clock: FakeClock) -> None:
    timed = sim.plan_job(GEMM, [(0, 1), (0, 0)])
    assert timed.cores == ((0, 0), (0, 1))
    assert sim.jobs() == []  # planning queues nothing
    clock.now += 30.0  # a first timing of a large shape under load
    info = sim.job(sim.queue(timed))
    assert (info.state, info.submitted, info.started, info.progress) == (
        "running",
        1030.0,
        1030.0,
        0.0,
    )


def test_jobs_on_the_same_core_queue_in_order(sim: ServerSim, clock: FakeClock) -> None:
    first = sim.submit(GEMM, [(0, 0), (0, 1)])
    second = sim.submit(GEMM, [(0, 1)])
    third = sim.submit(GEMM, [(1, 0)])
    assert [sim.job(j).state for j in (first, second, third)] == ["running", "queued", "running"]
    clock.now += sim.job(first).duration * 1.01
    assert sim.job(first).state == "succeeded"
    assert sim.job(second).state == "running"
    assert sim.job(second).started == pytest.approx(sim.job(first).finished)


def test_cancel(sim: ServerSim, clock: FakeClock) -> None:
    running = sim.submit(GEMM, [(2, 0)])
    queued = sim.submit(GEMM, [(2, 0)])
    assert sim.cancel(queued).state == "cancelled"
    clock.now += 0.01
    info = sim.cancel(running)
    assert info.state == "cancelled" and 0 < info.progress < 1
    assert sim.cancel(running).state == "cancelled"
    with pytest.raises(JobNotFoundError):
        sim.job("job-999")


@pytest.mark.parametrize("cores", [[], [(4, 0)], [(0, 8)], [(0, 1), (0, 1)], [(0, "1")]])
def test_bad_cores_are_refused(sim: ServerSim, cores: list[tuple[int, int]]) -> None:
    with pytest.raises(WorkloadError, match=r"^cores: "):
        sim.submit(GEMM, cores)
    assert sim.jobs() == []


def test_telemetry_reports_utilization_and_counters(sim: ServerSim, clock: FakeClock) -> None:
    job_id = sim.submit(GEMM, [(1, k) for k in range(4)])
    clock.now += 5.0  # longer than the job; utilization decays with a 1 s constant
    tel = sim.telemetry()
    info = sim.job(job_id)
    assert info.state == "succeeded"
    core = next(c for c in tel.cores if (c.chip, c.core) == (1, 0))
    idle = next(c for c in tel.cores if (c.chip, c.core) == (1, 7))
    assert core.jobs_completed == 1 and idle.jobs_completed == 0
    assert core.flops == pytest.approx(GEMM.iterations * 2 * 256 * 1024 * 1024, rel=1e-6)
    assert core.dma_bytes > 0 and idle.dma_bytes == 0
    assert core.busy_seconds["tensor"] == pytest.approx(
        info.duration * workload_timing(GEMM, GEN2, 4, 1).compute.busy_ratio[0], rel=1e-6
    )
    assert len(core.latencies) == 1
    assert core.latencies[0] == pytest.approx(info.duration)
    assert tel.chips[1].ecc["ecc-corrected-hbm"] == 0
    assert tel.chips[1].hbm_bytes_total == 144 << 30


def test_utilization_tracks_a_running_job(sim: ServerSim, clock: FakeClock) -> None:
    long = parse_workload({**GEMM.spec(), "iterations": 10**6})
    sim.submit(long, [(0, 0)])
    clock.now += 10.0
    tel = sim.telemetry()
    core = next(c for c in tel.cores if (c.chip, c.core) == (0, 0))
    expected = sim.jobs()[0].utilization
    assert 0.5 < expected < 1.0
    assert core.utilization == pytest.approx(expected, rel=1e-3)
    assert core.engine_busy["tensor"] == pytest.approx(expected, rel=0.05)
    assert core.sbuf_bytes_used > 0 and core.job == sim.jobs()[0].id
    assert tel.chips[0].hbm_bytes_used > 0


STREAM = parse_workload({"kind": "elementwise", "rows": 8192, "cols": 4096, "iterations": 100})


def test_cores_streaming_at_once_share_the_chips_hbm(clock: FakeClock) -> None:
    """Eight Trn2 cores want more than 2.9 TB/s: each gets an eighth, and the
    streaming op slows down to HBM speed."""
    sim = ServerSim(TRN2, 0, clock=clock)
    alone = sim.submit(STREAM, [(0, 0)])
    t_alone = sim.job(alone).duration
    sim.cancel(alone)
    crowd = [sim.submit(STREAM, [(0, k)]) for k in range(8)]
    t_crowd = sim.job(crowd[0]).duration
    assert t_crowd > 1.1 * t_alone
    per_core = workload_timing(STREAM, TRN2, 1, 1).compute.dma_bytes * STREAM.iterations / t_crowd
    assert 8 * per_core == pytest.approx(TRN2.chip.hbm_bandwidth, rel=0.05)
    # Elsewhere on the server nothing changes.
    other = sim.submit(STREAM, [(1, 0)])
    assert sim.job(other).duration == pytest.approx(t_alone)


def test_compute_bound_neighbours_keep_their_speed(clock: FakeClock) -> None:
    """HBM is shared max-min fairly: a GEMM that needs little bandwidth is not
    slowed by seven streaming cores beside it; the streamers split the rest."""
    sim = ServerSim(TRN2, 0, clock=clock)
    gemm_alone = sim.job(sim.submit(GEMM, [(0, 7)])).duration
    sim.cancel("job-1")
    streams = [sim.submit(STREAM, [(0, k)]) for k in range(7)]
    crowded_gemm = sim.submit(GEMM, [(0, 7)])
    assert sim.job(crowded_gemm).duration == pytest.approx(gemm_alone)
    stream_alone = workload_timing(STREAM, TRN2, 1, 1).duration
    assert sim.job(streams[0]).duration > stream_alone


def test_core_hang_stalls_the_job_until_cleared(sim: ServerSim, clock: FakeClock) -> None:
    job_id = sim.submit(GEMM, [(3, 2), (3, 3)])
    clock.now += 0.01
    before = sim.job(job_id).progress
    hang = Fault(FaultKind.CORE_HANG, chip=3, core=2)
    sim.inject(hang)
    assert sim.chip_health()[3].state == "degraded"
    clock.now += 100.0
    assert sim.job(job_id).progress == pytest.approx(before)
    assert sim.job(job_id).state == "running"
    tel = sim.telemetry()
    hung = next(c for c in tel.cores if (c.chip, c.core) == (3, 2))
    assert hung.hung and hung.utilization < 1e-6
    sim.clear(hang)
    assert sim.chip_health()[3].state == "healthy"
    clock.now += sim.job(job_id).duration
    assert sim.job(job_id).state == "succeeded"


def test_uncorrected_hbm_error_fails_the_running_job(sim: ServerSim, clock: FakeClock) -> None:
    victim = sim.submit(GEMM, [(2, 0)])
    bystander = sim.submit(GEMM, [(1, 0)])
    clock.now += 0.001
    fault = Fault(FaultKind.ECC_UNCORRECTED_HBM, chip=2)
    sim.inject(fault)
    info = sim.job(victim)
    assert info.state == "failed" and "uncorrected HBM ECC" in (info.error or "")
    assert sim.job(bystander).state == "running"
    health = sim.chip_health()[2]
    assert health.state == "failed" and "HBM" in health.reason
    later = sim.submit(GEMM, [(2, 1)])
    assert sim.job(later).state == "failed"
    tel = sim.telemetry()
    assert tel.chips[2].ecc["ecc-uncorrected-hbm"] == 1
    assert next(c for c in tel.cores if (c.chip, c.core) == (2, 0)).jobs_failed == 1
    sim.clear(fault)
    assert sim.chip_health()[2].state == "healthy"
    assert sim.job(sim.submit(GEMM, [(2, 1)])).state == "running"


def test_uncorrected_sram_error_fails_only_that_cores_job(sim: ServerSim) -> None:
    hit = sim.submit(GEMM, [(0, 4)])
    other = sim.submit(GEMM, [(0, 5)])
    sim.inject(Fault(FaultKind.ECC_UNCORRECTED_SRAM, chip=0, core=4))
    assert sim.job(hit).state == "failed"
    assert sim.job(other).state == "running"


def test_corrected_errors_are_counted_and_harmless(sim: ServerSim) -> None:
    job_id = sim.submit(GEMM, [(1, 1)])
    for _ in range(3):
        sim.inject(Fault(FaultKind.ECC_CORRECTED_SRAM, chip=1, core=1))
    sim.inject(Fault(FaultKind.ECC_CORRECTED_HBM, chip=1))
    tel = sim.telemetry()
    assert tel.chips[1].ecc["ecc-corrected-sram"] == 3
    assert tel.chips[1].ecc["ecc-corrected-hbm"] == 1
    assert sim.job(job_id).state == "running"
    assert sim.chip_health()[1].state == "healthy"


def test_link_down_fails_communication_but_not_compute(sim: ServerSim, clock: FakeClock) -> None:
    comm = sim.submit(ALL_REDUCE, [(0, 0), (1, 0)])
    compute = sim.submit(GEMM, [(0, 1)])
    sim.inject(Fault(FaultKind.LINK_DOWN, chip=1))
    assert sim.job(comm).state == "failed"
    assert "NeuronLink" in (sim.job(comm).error or "")
    assert sim.job(compute).state == "running"
    assert sim.job(sim.submit(ALL_REDUCE, [(1, 3)])).state == "failed"
    assert sim.chip_health()[1].state == "degraded"


def test_all_reduce_moves_bytes_over_the_links(sim: ServerSim, clock: FakeClock) -> None:
    job_id = sim.submit(ALL_REDUCE, [(c, 0) for c in range(4)])
    clock.now += 10.0
    assert sim.job(job_id).state == "succeeded"
    sent = workload_timing(ALL_REDUCE, GEN2, 4, 4).comm_bytes
    assert sim.telemetry().chips[0].link_bytes == pytest.approx(sent)


@pytest.mark.parametrize(
    ("fault", "field"),
    [
        (lambda: Fault(FaultKind.CORE_HANG, chip=0), "core"),
        (lambda: Fault(FaultKind.LINK_DOWN, chip=0, core=1), "core"),
        (lambda: Fault("meltdown", chip=0), "kind"),  # type: ignore[arg-type]
        (lambda: Fault(FaultKind.LINK_DOWN, chip=-1), "chip"),
    ],
)
def test_bad_faults_name_the_field(fault: object, field: str) -> None:
    with pytest.raises(FaultError, match=rf"^{field}: "):
        fault()  # type: ignore[operator]


def test_faults_must_name_this_servers_hardware(sim: ServerSim) -> None:
    with pytest.raises(FaultError, match=r"^chip: "):
        sim.inject(Fault(FaultKind.LINK_DOWN, chip=4))
    with pytest.raises(FaultError, match=r"^core: "):
        sim.inject(Fault(FaultKind.CORE_HANG, chip=0, core=8))


def test_a_rack_of_servers_in_one_process(clock: FakeClock) -> None:
    rack = [ServerSim(GEN2, s, clock=clock) for s in range(GEN2.servers)]
    step = parse_workload({"kind": "train-step", "hidden": 1024, "seq": 1024, "chips": 144})
    ids = [s.submit(step, [(c, k) for c in range(4) for k in range(8)]) for s in rack]
    durations = {s.job(j).duration for s, j in zip(rack, ids, strict=True)}
    assert len(durations) == 1
    clock.now += durations.pop() * 1.001
    assert all(s.job(j).state == "succeeded" for s, j in zip(rack, ids, strict=True))
    assert sum(len(s.telemetry().cores) for s in rack) == 1152


def test_numerics_on_request(sim: ServerSim, clock: FakeClock) -> None:
    spec = {"kind": "gemm", "m": 256, "n": 512, "k": 256, "dtype": "mxfp8", "numerics": True}
    job_id = sim.submit(parse_workload(spec), [(0, 0), (0, 1)])
    assert sim.job(job_id).numerics is None  # not before it has run
    clock.now += 1.0
    report = sim.job(job_id).numerics
    assert report is not None and report["ok"] is True
    assert 1e-3 < float(report["relative_error"]) <= float(report["tolerance"])
    plain = sim.submit(parse_workload({**spec, "numerics": False}), [(0, 2)])
    clock.now += 1.0
    assert sim.job(plain).numerics is None


def test_numerics_refuse_shapes_too_large_for_the_data_path(sim: ServerSim) -> None:
    spec = {"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "numerics": True}
    with pytest.raises(WorkloadError, match=r"^numerics: "):
        sim.submit(parse_workload(spec), [(0, 0)])
    assert sim.jobs() == []


def test_a_job_with_nothing_to_do_finishes_at_once(sim: ServerSim) -> None:
    alone = parse_workload({"kind": "all-reduce", "bytes": 1 << 20, "chips": 1})
    job_id = sim.submit(alone, [(0, 0)])
    info = sim.job(job_id)
    assert (info.state, info.progress, info.duration) == ("succeeded", 1.0, 0.0)
    assert info.finished == info.started == info.submitted


def test_telemetry_reports_the_hbm_the_running_jobs_keep(sim: ServerSim) -> None:
    sim.submit(GEMM, [(2, 0), (2, 1)])
    per_core = workload_timing(GEMM, GEN2, 2, 1).hbm_bytes
    assert per_core > 0
    assert sim.telemetry().chips[2].hbm_bytes_used == 2 * per_core
