# ruff: noqa: PLR1730 - hot loops: an if costs less than a call to max()
"""Timing a kernel's program without building it: a player walks the kernel's
schedule and plays each instruction through the event-driven model as it would
be issued.

Building a program in Python costs several times what playing it does (views,
tokens, checks and a row per instruction), and a large one holds hundreds of
megabytes until it is timed. `workloads.workload_timing` times its sampled
programs here instead. A player does the same arithmetic in the same order as
`timing.simulate` on the built program (the engine-busy and latency seconds of
each distinct instruction come from `timing.durations` itself), so its
`ProgramTiming` is the exact model's to the bit; tests/simdevice/test_players.py
compares the two over many shapes. Errors are the kernel's: a small program of
the same shape is built and timed first, so a bad shape, dtype or a program
that does not fit raises what building it whole would.
"""

from array import array
from collections import deque
from collections.abc import Callable
from typing import Any

from simdevice.isa import (
    BF16_EQUIVALENT,
    DTYPE_BYTES,
    DTYPE_CODE,
    EXP,
    IN_PSUM,
    IS_ACTIVATION,
    MOVING_FREE_MAX,
    PARTITIONS,
    PSUM_BANKS,
    SPARSITY_CODE,
    TRANSCENDENTAL_OTHER,
    Buffer,
    Op,
    Program,
    Queue,
    contraction_tiles,
)
from simdevice.kernels.attention import (
    KV_SETS,
    SLOTS,
    TRANSPOSES,
    attention,
    attention_buffers,
)
from simdevice.kernels.gemm import (
    A_DOUBLE_BUFFER_LIMIT,
    B_BUFFERS,
    STORAGE_DTYPE,
    block_rows,
    gemm,
    output_dtype,
)
from simdevice.timing import ProgramTiming, core_timing, durations, time_program
from simdevice.topology import ChipSpec

# Below this, every FLOP and byte count of a program is a multiple of 1/64 and
# every partial sum is exact, so their sums do not depend on the order (numpy
# sums pairwise, a player one by one).
_EXACT_SUM = 2.0**44


def _density(sparsity: str) -> float:
    if sparsity == "dense":
        return 1.0
    nonzero, group = (int(x) for x in sparsity.split(":"))
    return nonzero / group


class _Costs:
    """Busy and latency seconds of instructions by descriptor, from the
    model's own `durations` (each distinct descriptor computed once)."""

    def __init__(self, chip: ChipSpec, dma_bandwidth: float | None) -> None:
        self._chip, self._bandwidth = chip, dma_bandwidth
        self._known: dict[tuple[int, int, float, float, float], tuple[float, float]] = {}

    def __call__(self, queue: int, op: int, a: float, b: float, c: float) -> tuple[float, float]:
        key = (queue, op, a, b, c)
        if key not in self._known:
            probe = Program(
                "probe",
                queue=array("q", [queue]),
                op=array("q", [op]),
                a=array("d", [a]),
                b=array("d", [b]),
                c=array("d", [c]),
                flops=array("d", [0.0]),
            )
            busy, latency = durations(probe, self._chip, self._bandwidth)
            self._known[key] = (float(busy[0]), float(latency[0]))
        return self._known[key]


def _store(  # noqa: PLR0917 - the hot loop's locals, passed and returned as they are
    pending: list[tuple[float, int, float, float, float]],
    c_free: list[float],
    ring: list[float],
    free_s: float,
    sync_last: float,
    ri: int,
    busy_s: float,
    dma_bytes: float,
) -> tuple[float, float, int, float, float]:
    """`play_gemm`'s pending stores (ready, PSUM bank, busy, latency, bytes)
    issued on the Sync queue as its inline loads are, and `pending` emptied.
    A call, not inlined: it runs once per column tile and once at the end.
    Each store frees its bank in `c_free`; returns the Sync state and sums."""
    outstanding = len(ring)
    for ev, bank, busy, latency, nbytes in pending:
        s = free_s
        if ev > s:
            s = ev
        if ring[ri] > s:
            s = ring[ri]
        free_s = s + busy
        e = free_s + latency
        if e < sync_last:
            e = sync_last
        sync_last = ring[ri] = e
        ri = (ri + 1) % outstanding
        busy_s += busy
        dma_bytes += nbytes
        c_free[bank] = e
    pending.clear()
    return free_s, sync_last, ri, busy_s, dma_bytes


def play_gemm(
    m: int,
    n: int,
    k: int,
    dtype: str,
    sparsity: str,
    *,
    chip: ChipSpec,
    dma_bandwidth: float | None,
) -> ProgramTiming:
    """`time_program(gemm(m, n, k, dtype, sparsity), chip, dma_bandwidth)`,
    played from the schedule of `kernels.gemm` without building the program."""
    if min(m, n) < 1:
        return time_program(gemm(m, n, k, dtype, sparsity), chip, dma_bandwidth)
    # raises whatever the whole program would: shape, dtype, capacity, bandwidth
    small = time_program(gemm(1, 1, k, dtype, sparsity), chip, dma_bandwidth)
    sdt, out_dt = STORAGE_DTYPE[dtype], output_dtype(dtype)
    in_bytes, out_bytes = DTYPE_BYTES[sdt], DTYPE_BYTES[out_dt]
    rows_per_block = block_rows(k, dtype)
    k_tiles = -(-k // PARTITIONS)
    blocks = -(-m // rows_per_block)
    flops_per = 2.0 * _density(sparsity) * BF16_EQUIVALENT[dtype]
    moved = (k * m + k * n * blocks) * in_bytes + m * n * out_bytes
    if not (flops_per * 64).is_integer() or max(flops_per * m * n * k, moved) >= _EXACT_SUM:
        return time_program(gemm(m, n, k, dtype, sparsity), chip, dma_bandwidth)
    pack = contraction_tiles(dtype, sparsity)
    a_buffers = 2 if 2 * (k_tiles * rows_per_block * in_bytes) <= A_DOUBLE_BUFFER_LIMIT else 1
    groups = [list(range(g0, min(g0 + pack, k_tiles))) for g0 in range(0, k_tiles, pack)]
    contraction_rows = [min(PARTITIONS, k - ki * PARTITIONS) for ki in range(k_tiles)]
    flush_at = min(B_BUFFERS, k_tiles) - 1
    cost = _Costs(chip, dma_bandwidth)
    sync, tensor, vector = int(Queue.SYNC), int(Queue.TENSOR), int(Queue.VECTOR)
    code = float(DTYPE_CODE[dtype] * 16 + SPARSITY_CODE[sparsity])
    outstanding = core_timing(chip).dma_outstanding

    # the model's state (timing.simulate), a token being its event's time (0.0: none)
    free_t = free_v = free_s = 0.0
    sync_last = tensor_start = last_end = 0.0
    ring = [0.0] * outstanding  # the last `outstanding` Sync completions
    ri = 0
    busy_t = busy_v = busy_s = 0.0
    flops = dma_bytes = 0.0
    instructions = 0

    a_free = [0.0] * a_buffers
    b_free = [0.0] * B_BUFFERS
    bank_free = [0.0] * PSUM_BANKS
    c_free = [0.0] * PSUM_BANKS
    pending: list[tuple[float, int, float, float, float]] = []  # ev, bank, busy, latency, bytes
    b_count = tile_count = 0
    last_mm = 0.0
    # per (columns, PSUM bank set, block rows): B loads' and matmuls' costs
    tiles: dict[tuple[int, int, int], tuple[list[tuple[float, float]], list[Any]]] = {}

    for row0 in range(0, m, rows_per_block):
        block = row0 // rows_per_block
        rows = min(rows_per_block, m - row0)
        tile_rows = [min(PARTITIONS, rows - col) for col in range(0, rows, PARTITIONS)]
        stationary = [
            (*cost(tensor, int(Op.LOAD_STATIONARY), 0.0, float(r), float(r)), float(r))
            for r in tile_rows
        ]
        a_tokens = []
        wait = a_free[block % a_buffers]
        for kk in contraction_rows:
            nbytes = kk * rows * in_bytes
            busy, latency = cost(sync, int(Op.DMA_LOAD), nbytes, rows * in_bytes, 0.0)
            s = free_s
            if wait > s:
                s = wait
            if ring[ri] > s:
                s = ring[ri]
            free_s = s + busy
            e = free_s + latency
            if e < sync_last:
                e = sync_last
            sync_last = ring[ri] = e
            ri = (ri + 1) % outstanding
            busy_s += busy
            dma_bytes += nbytes
            a_tokens.append(e)
        instructions += k_tiles
        a_waits = [max(a_tokens[ki] for ki in group) for group in groups]
        for col0 in range(0, n, MOVING_FREE_MAX):
            nn = min(MOVING_FREE_MAX, n - col0)
            bank_set = (tile_count % 2) * (PSUM_BANKS // 2)
            tile_count += 1
            shape = (nn, bank_set, rows)
            if shape not in tiles:
                tiles[shape] = (
                    [
                        cost(sync, int(Op.DMA_LOAD), kk * nn * in_bytes, nn * in_bytes, 0.0)
                        for kk in contraction_rows
                    ],
                    [
                        (
                            *stationary[mi],
                            *cost(tensor, int(Op.MULTIPLY_MOVING), float(nn), code, float(r)),
                            bank_set + mi,
                        )
                        for mi, r in enumerate(tile_rows)
                    ],
                )
            b_costs, matmuls = tiles[shape]
            for group, a_wait in zip(groups, a_waits, strict=True):
                first = group[0] == 0
                b_wait = 0.0
                slots = []
                k_group = 0
                for ki in group:
                    kk = contraction_rows[ki]
                    k_group += kk
                    slot = b_count % B_BUFFERS
                    b_count += 1
                    busy, latency = b_costs[ki]
                    s = free_s
                    if b_free[slot] > s:
                        s = b_free[slot]
                    if ring[ri] > s:
                        s = ring[ri]
                    free_s = s + busy
                    e = free_s + latency
                    if e < sync_last:
                        e = sync_last
                    sync_last = ring[ri] = e
                    ri = (ri + 1) % outstanding
                    busy_s += busy
                    dma_bytes += kk * nn * in_bytes
                    if e > b_wait:
                        b_wait = e
                    slots.append(slot)
                    if ki == flush_at:
                        instructions += len(pending)
                        free_s, sync_last, ri, busy_s, dma_bytes = _store(
                            pending, c_free, ring, free_s, sync_last, ri, busy_s, dma_bytes
                        )
                for ls_busy, _, rows_m, mm_busy, mm_latency, bank in matmuls:
                    # LoadStationary: behind the previous matmul, waiting for A
                    s = tensor_start
                    if a_wait > s:
                        s = a_wait
                    e = s + ls_busy
                    if e > free_t:
                        free_t = e
                    # MultiplyMoving
                    s = free_t
                    if b_wait > s:
                        s = b_wait
                    if first and bank_free[bank] > s:
                        s = bank_free[bank]
                    free_t = s + mm_busy
                    tensor_start = s
                    last_mm = free_t + mm_latency
                    if last_mm > last_end:
                        last_end = last_mm
                    busy_t += mm_busy
                    flops += flops_per * k_group * rows_m * nn
                instructions += 2 * len(matmuls) + len(group)
                for slot in slots:
                    b_free[slot] = last_mm
            for mi, r in enumerate(tile_rows):
                bank = bank_set + mi
                busy, _ = cost(vector, int(Op.COPY), float(nn), float(IN_PSUM), 0.0)
                s = free_v
                if last_mm > s:
                    s = last_mm
                if c_free[bank] > s:
                    s = c_free[bank]
                free_v = s + busy
                busy_v += busy
                bank_free[bank] = free_v
                store = cost(sync, int(Op.DMA_STORE), r * nn * out_bytes, nn * out_bytes, 0.0)
                pending.append((free_v, bank, *store, r * nn * out_bytes))
            instructions += len(tile_rows)
        a_free[block % a_buffers] = last_mm
    instructions += len(pending)
    free_s, sync_last, ri, busy_s, dma_bytes = _store(
        pending, c_free, ring, free_s, sync_last, ri, busy_s, dma_bytes
    )
    hbm = (
        k * Buffer("aT", "hbm", k, m, sdt).bytes_per_row
        + k * Buffer("b", "hbm", k, n, sdt).bytes_per_row
        + m * Buffer("c", "hbm", m, n, out_dt).bytes_per_row
    )
    return ProgramTiming(
        duration=max(last_end, sync_last, free_t, free_v, free_s),
        instructions=instructions,
        busy=(busy_t, busy_v, 0.0, 0.0, busy_s),
        flops=flops,
        dma_bytes=dma_bytes,
        sbuf_bytes=small.sbuf_bytes,
        psum_bytes=small.psum_bytes,
        hbm_bytes=hbm,
    )


class _Core:
    """`timing.simulate`'s state, one instruction at a time (a token being
    its event's time, 0.0 for none)."""

    def __init__(self, chip: ChipSpec) -> None:
        self.free = [0.0] * len(Queue)
        self.busy = [0.0] * len(Queue)
        self.sync_last = self.tensor_start = self.last_end = 0.0
        self.outstanding = core_timing(chip).dma_outstanding
        self.ring = [0.0] * self.outstanding  # the last Sync completions
        self.ri = 0
        self.instructions = 0

    def issue(self, queue: int, cost: tuple[float, float], *waits: float) -> float:
        busy, latency = cost
        s = self.free[queue]
        for w in waits:
            if w > s:
                s = w
        if queue == _SYNC:
            r = self.ring[self.ri]
            if r > s:
                s = r
            self.free[queue] = s + busy
            e = self.free[queue] + latency
            if e < self.sync_last:
                e = self.sync_last
            self.sync_last = self.ring[self.ri] = e
            self.ri = (self.ri + 1) % self.outstanding
        else:
            e = s + busy
            self.free[queue] = e
            if queue == _TENSOR:
                self.tensor_start = s
            e += latency
        if e > self.last_end:
            self.last_end = e
        self.busy[queue] += busy
        self.instructions += 1
        return e

    def load_stationary(self, cost: tuple[float, float], *waits: float) -> None:
        """Runs behind the previous matmul; not engine time of its own."""
        s = self.tensor_start
        for w in waits:
            if w > s:
                s = w
        e = s + cost[0]
        if e > self.free[_TENSOR]:
            self.free[_TENSOR] = e
        self.instructions += 1

    def timing(self, flops: float, dma_bytes: float, buffers: ProgramTiming) -> ProgramTiming:
        return ProgramTiming(
            duration=max(self.last_end, *self.free),
            instructions=self.instructions,
            busy=tuple(self.busy),
            flops=flops,
            dma_bytes=dma_bytes,
            sbuf_bytes=buffers.sbuf_bytes,
            psum_bytes=buffers.psum_bytes,
            hbm_bytes=buffers.hbm_bytes,
        )


_TENSOR, _VECTOR, _SCALAR, _GPSIMD, _SYNC = (int(q) for q in Queue)


def play_attention(
    seq: int, head_dim: int, dtype: str, heads: int, *, chip: ChipSpec, dma_bandwidth: float | None
) -> ProgramTiming:
    """`time_program(attention(seq, head_dim, dtype, heads), chip, dma_bandwidth)`,
    played from the schedule of `kernels.attention` without building it."""
    # its buffers alone: raises what the whole program would (arguments, capacity)
    buffers = time_program(attention_buffers(seq, head_dim, dtype, heads), chip, dma_bandwidth)
    s, d = seq, head_dim
    size = DTYPE_BYTES[dtype]
    cost = _Costs(chip, dma_bandwidth)
    core = _Core(chip)
    issue = core.issue
    key_chunks = -(-s // PARTITIONS)
    sets = min(KV_SETS, heads)
    code = float(DTYPE_CODE[dtype] * 16 + SPARSITY_CODE["dense"])
    eq = BF16_EQUIVALENT[dtype]
    flops = dma_bytes = 0.0

    def load(i: int, wait: float) -> float:
        nonlocal dma_bytes
        t = issue(_SYNC, cost(_SYNC, int(Op.DMA_LOAD), d * s * size, s * size, 0.0), wait)
        t = issue(_SYNC, cost(_SYNC, int(Op.DMA_LOAD), d * s * size, s * size, 0.0), wait)
        dma_bytes += 2 * (d * s * size)
        for j in range(key_chunks):
            nk = min(PARTITIONS, s - j * PARTITIONS)
            t = issue(_SYNC, cost(_SYNC, int(Op.DMA_LOAD), nk * d * size, d * size, 0.0), wait)
            dma_bytes += nk * d * size
        return t

    set_free = [0.0] * sets
    ps_s_free = [0.0, 0.0]
    ps_t_free = [0.0] * TRANSPOSES
    p_t_free = [0.0] * TRANSPOSES
    slot_free = [0.0] * SLOTS
    chunk = pair = tile = 0

    def transpose_block(j: int, nq: int, probs_ready: float) -> tuple[float, int, int]:
        nonlocal pair
        nk = min(PARTITIONS, s - j * PARTITIONS)
        bank = pair % TRANSPOSES
        pair += 1
        tr_cost = cost(_TENSOR, int(Op.TRANSPOSE), float(nq), float(DTYPE_CODE["bf16"] * 16), nk)
        tr = issue(_TENSOR, tr_cost, probs_ready, ps_t_free[bank])
        queue = _VECTOR if j % 2 == 0 else _GPSIMD
        cp = issue(
            queue, cost(queue, int(Op.COPY), float(nq), float(IN_PSUM), 0.0), tr, p_t_free[bank]
        )
        ps_t_free[bank] = cp
        return cp, bank, nk

    loaded = load(0, set_free[0])
    for h in range(heads):
        next_loaded = load((h + 1) % sets, set_free[(h + 1) % sets]) if h + 1 < heads else 0.0
        mm = 0.0
        for q0 in range(0, s, PARTITIONS):
            nq = min(PARTITIONS, s - q0)
            slot = tile % SLOTS
            tile += 1
            stationary = cost(_TENSOR, int(Op.LOAD_STATIONARY), 0.0, float(nq), float(nq))
            t = 0.0
            for c0 in range(0, s, MOVING_FREE_MAX):
                nk = min(MOVING_FREE_MAX, s - c0)
                bank = chunk % 2
                chunk += 1
                core.load_stationary(stationary, loaded)
                mm_cost = cost(_TENSOR, int(Op.MULTIPLY_MOVING), float(nk), code, float(nq))
                mm = issue(_TENSOR, mm_cost, ps_s_free[bank])
                flops += 2.0 * d * nq * nk * 1.0 * eq
                scaled = IN_PSUM | IS_ACTIVATION
                t = issue(
                    _SCALAR,
                    cost(_SCALAR, int(Op.ACTIVATION), float(nk), float(scaled), 0.0),
                    mm,
                    slot_free[slot],
                )
                ps_s_free[bank] = t
            t = issue(_VECTOR, cost(_VECTOR, int(Op.REDUCE), float(s), 0.0, 0.0), t)
            t = issue(_VECTOR, cost(_VECTOR, int(Op.TENSOR_SCALAR), 1.0, 0.0, 0.0), t)
            exp = float(EXP | IS_ACTIVATION)
            probs_ready = issue(_SCALAR, cost(_SCALAR, int(Op.ACTIVATION), float(s), exp, 0.0), t)
            ahead = deque(
                transpose_block(j, nq, probs_ready) for j in range(min(TRANSPOSES, key_chunks))
            )
            for j in range(key_chunks):
                cp, bank, nk = ahead.popleft()
                core.load_stationary(stationary, cp)
                mm_cost = cost(_TENSOR, int(Op.MULTIPLY_MOVING), float(d), code, float(nq))
                mm = issue(_TENSOR, mm_cost, slot_free[slot])
                flops += 2.0 * nk * nq * d * 1.0 * eq
                p_t_free[bank] = mm
                if j + TRANSPOSES < key_chunks:
                    ahead.append(transpose_block(j + TRANSPOSES, nq, probs_ready))
            reciprocal = float(TRANSCENDENTAL_OTHER | IS_ACTIVATION)
            rcp = issue(
                _SCALAR, cost(_SCALAR, int(Op.ACTIVATION), 1.0, reciprocal, 0.0), probs_ready
            )
            t = issue(
                _VECTOR,
                cost(_VECTOR, int(Op.TENSOR_SCALAR), float(d), float(IN_PSUM), 0.0),
                mm,
                rcp,
            )
            store = cost(_SYNC, int(Op.DMA_STORE), nq * d * size, d * size, 0.0)
            slot_free[slot] = issue(_SYNC, store, t)
            dma_bytes += nq * d * size
        set_free[h % sets] = mm
        loaded = next_loaded
    return core.timing(flops, dma_bytes, buffers)


PLAYERS: dict[Callable[..., Program], Callable[..., ProgramTiming]] = {
    gemm: play_gemm,
    attention: play_attention,
}


def play(
    builder: Callable[..., Program],
    args: tuple[Any, ...],
    chip: ChipSpec,
    dma_bandwidth: float | None,
) -> ProgramTiming:
    """`time_program(builder(*args), chip, dma_bandwidth)`, by the builder's
    player when it has one."""
    player = PLAYERS.get(builder)
    if player is None:
        return time_program(builder(*args), chip, dma_bandwidth)
    return player(*args, chip=chip, dma_bandwidth=dma_bandwidth)
