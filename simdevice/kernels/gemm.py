"""Tiled GEMM on one core: C[M, N] = A[M, K] @ B[K, N].

A is stored transposed in HBM (aT[K, M]) so its tiles land with K on the
partitions, as the stationary operand needs. Rows are processed in blocks of
512 (four 128-row stationary tiles share every streamed B tile; 256 or 128
when all of K for 512 rows would not fit SBUF); the A block is double-buffered
when two fit, B tiles rotate through eight SBUF buffers, and the eight
PSUM banks form two sets of four so one set accumulates while the other is
evacuated. FP8, MX and sparse matmuls take two to four 128-row contraction
tiles per instruction. Stores are emitted after the next tile's first loads so the in-order
Sync queue keeps prefetching.
"""

from simdevice.isa import (
    DTYPE_BYTES,
    MOVING_FREE_MAX,
    PARTITIONS,
    PSUM_BANKS,
    CapacityError,
    Program,
    ProgramBuilder,
    ProgramError,
    Queue,
    Token,
    View,
    contraction_tiles,
)

BLOCK_ROWS = 4 * PARTITIONS  # rows per block when the A block fits
B_BUFFERS = 8
A_DOUBLE_BUFFER_LIMIT = 96 * 1024  # bytes per partition for two A blocks
A_BLOCK_LIMIT = 192 * 1024  # bytes per partition for one A block (SBUF less B/C tiles)

STORAGE_DTYPE = {
    "fp32": "fp32",
    "tf32": "fp32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "mxfp8": "mxfp8",
    "mxfp4": "mxfp4",
}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def output_dtype(dtype: str) -> str:
    return "fp32" if dtype in ("fp32", "tf32") else "bf16"


def block_rows(k: int, dtype: str) -> int:
    """Rows per block: 512 (four stationary tiles sharing every B tile) when
    the block's A (all of K) fits SBUF, fewer for long K."""
    per_row = _ceil_div(k, PARTITIONS) * DTYPE_BYTES[STORAGE_DTYPE[dtype]]
    for rows in (BLOCK_ROWS, BLOCK_ROWS // 2, PARTITIONS):
        if per_row * rows <= A_BLOCK_LIMIT:
            return rows
    raise CapacityError(
        f"k: {k} is too long for one core's SBUF: even 128 rows of A need "
        f"{per_row * PARTITIONS:.0f} bytes per partition (at most {A_BLOCK_LIMIT}); split K"
    )


def gemm(m: int, n: int, k: int, dtype: str = "bf16", sparsity: str = "dense") -> Program:
    for name, value in (("m", m), ("n", n), ("k", k)):
        if value < 1:
            raise ProgramError(f"{name}: must be >= 1, got {value}")
    if dtype not in STORAGE_DTYPE:
        raise ProgramError(f"dtype: {dtype!r} is not one of {', '.join(STORAGE_DTYPE)}")
    rows_per_block = block_rows(k, dtype)
    sdt = STORAGE_DTYPE[dtype]
    out_dt = output_dtype(dtype)
    pb = ProgramBuilder(f"gemm-{m}x{n}x{k}-{dtype}-{sparsity}")
    a_t = pb.hbm("aT", k, m, sdt)
    b = pb.hbm("b", k, n, sdt)
    c = pb.hbm("c", m, n, out_dt)

    k_tiles = _ceil_div(k, PARTITIONS)
    pack = contraction_tiles(dtype, sparsity)  # contraction tiles per matmul
    block_cols = k_tiles * rows_per_block
    a_row_bytes = block_cols * DTYPE_BYTES[sdt]
    a_buffers = 2 if 2 * a_row_bytes <= A_DOUBLE_BUFFER_LIMIT else 1
    a_blk = [pb.sbuf(f"a{i}", PARTITIONS, block_cols, sdt) for i in range(a_buffers)]
    b_buf = [pb.sbuf(f"b{i}", PARTITIONS, MOVING_FREE_MAX, sdt) for i in range(B_BUFFERS)]
    banks = [pb.psum(f"acc{i}", PARTITIONS, MOVING_FREE_MAX) for i in range(PSUM_BANKS)]
    c_buf = [pb.sbuf(f"c{i}", PARTITIONS, MOVING_FREE_MAX, out_dt) for i in range(PSUM_BANKS)]

    last_mm: Token | None = None
    a_free: list[Token | None] = [None] * a_buffers  # last MM that read each A buffer
    b_free: list[Token | None] = [None] * B_BUFFERS
    bank_free: list[Token | None] = [None] * PSUM_BANKS  # evacuation that drained each bank
    c_free: list[Token | None] = [None] * PSUM_BANKS  # store that drained each C buffer
    pending: list[tuple[View, View, Token | None, int]] = []
    b_count = 0
    tile_count = 0

    def flush() -> None:
        for dst, src, ev, slot in pending:
            c_free[slot] = pb.dma(dst, src, wait=(ev,), signal="st")
        pending.clear()

    groups = [range(g0, min(g0 + pack, k_tiles)) for g0 in range(0, k_tiles, pack)]
    contraction_rows = [min(PARTITIONS, k - ki * PARTITIONS) for ki in range(k_tiles)]
    for block, row0 in enumerate(range(0, m, rows_per_block)):
        rows = min(rows_per_block, m - row0)
        tile_rows = [min(PARTITIONS, rows - col) for col in range(0, rows, PARTITIONS)]
        abuf = a_blk[block % a_buffers]
        a_tokens = []
        for ki, kk in enumerate(contraction_rows):
            col = ki * rows_per_block
            a_tokens.append(
                pb.dma(
                    abuf[0:kk, col : col + rows],
                    a_t[ki * PARTITIONS : ki * PARTITIONS + kk, row0 : row0 + rows],
                    wait=(a_free[block % a_buffers],),
                    signal="ld",
                )
            )
        # A block's stationary tiles (and the loads they wait for) are the
        # same for every column tile: made once per block.
        stationaries = [
            [
                tuple(
                    abuf[
                        0 : contraction_rows[ki],
                        ki * rows_per_block + mi * PARTITIONS : ki * rows_per_block
                        + mi * PARTITIONS
                        + mm_rows,
                    ]
                    for ki in group
                )
                for mi, mm_rows in enumerate(tile_rows)
            ]
            for group in groups
        ]
        a_waits = [tuple(a_tokens[ki] for ki in group) for group in groups]
        for col0 in range(0, n, MOVING_FREE_MAX):
            nn = min(MOVING_FREE_MAX, n - col0)
            bank_set = (tile_count % 2) * (PSUM_BANKS // 2)
            tile_count += 1
            accumulators = [
                banks[bank_set + mi][0:mm_rows, 0:nn] for mi, mm_rows in enumerate(tile_rows)
            ]
            for group, stationary, a_wait in zip(groups, stationaries, a_waits, strict=True):
                first = group[0] == 0
                slots = []
                b_tokens = []
                for ki in group:
                    kk = contraction_rows[ki]
                    slot = b_count % B_BUFFERS
                    b_count += 1
                    b_tokens.append(
                        pb.dma(
                            b_buf[slot][0:kk, 0:nn],
                            b[ki * PARTITIONS : ki * PARTITIONS + kk, col0 : col0 + nn],
                            wait=(b_free[slot],),
                            signal="ld",
                        )
                    )
                    slots.append(slot)
                    if ki == min(B_BUFFERS, k_tiles) - 1:
                        flush()
                moving = tuple(
                    b_buf[slot][0 : contraction_rows[ki], 0:nn]
                    for slot, ki in zip(slots, group, strict=True)
                )
                for mi, acc in enumerate(accumulators):
                    pb.load_stationary(stationary[mi], wait=a_wait)
                    bank = bank_set + mi
                    last_mm = pb.multiply_moving(
                        acc,
                        moving,
                        dtype=dtype,
                        sparsity=sparsity,
                        accumulate=not first,
                        wait=(*b_tokens, bank_free[bank] if first else None),
                        signal="mm",
                    )
                for slot in slots:
                    b_free[slot] = last_mm
            for mi, acc in enumerate(accumulators):
                mm_rows = tile_rows[mi]
                bank = bank_set + mi
                ev = pb.copy(
                    c_buf[bank][0:mm_rows, 0:nn],
                    acc,
                    queue=Queue.VECTOR,
                    wait=(last_mm, c_free[bank]),
                    signal="ev",
                )
                bank_free[bank] = ev
                r = row0 + mi * PARTITIONS
                pending.append(
                    (c[r : r + mm_rows, col0 : col0 + nn], c_buf[bank][0:mm_rows, 0:nn], ev, bank)
                )
        a_free[block % a_buffers] = last_mm
    flush()
    return pb.build()
