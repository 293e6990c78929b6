"""Row-wise kernels over [rows, cols] HBM tensors: elementwise, softmax,
layernorm. Rows are tiled 128 to a tile (one row per partition); tiles are
double-buffered so the DMA of tile i+1 overlaps compute on tile i, and the
store of tile i is emitted after the load of tile i+1 so the in-order Sync
queue keeps prefetching.
"""

from collections.abc import Callable

from simdevice.isa import PARTITIONS, Buffer, Program, ProgramBuilder, ProgramError, Queue, Token

TILE_BUFFERS = 2
MAX_ROW_BYTES = 32 * 1024  # FP32 bytes of one tile row (per partition)

Waits = tuple[Token | None, ...]
# body(slot, rows, x_tile, y_tile, waits) -> token meaning "y is ready, x is free"
Body = Callable[[int, int, Buffer, Buffer, Waits], Token | None]


def _check(rows: int, cols: int, dtype: str) -> None:
    for name, value in (("rows", rows), ("cols", cols)):
        if value < 1:
            raise ProgramError(f"{name}: must be >= 1, got {value}")
    if dtype not in ("fp32", "bf16"):
        raise ProgramError(f"dtype: row-wise kernels take fp32 or bf16, got {dtype!r}")
    if cols * 4 > MAX_ROW_BYTES:
        raise ProgramError(
            f"cols: {cols} values per row exceed a {MAX_ROW_BYTES // 4}-element tile row; "
            "split the rows"
        )


def _rowwise(
    name: str, rows: int, cols: int, dtype: str, make_body: Callable[[ProgramBuilder], Body]
) -> Program:
    _check(rows, cols, dtype)
    pb = ProgramBuilder(f"{name}-{rows}x{cols}-{dtype}")
    x = pb.hbm("x", rows, cols, dtype)
    y = pb.hbm("y", rows, cols, dtype)
    body = make_body(pb)
    xs = [pb.sbuf(f"x{i}", PARTITIONS, cols, dtype) for i in range(TILE_BUFFERS)]
    ys = [pb.sbuf(f"y{i}", PARTITIONS, cols, dtype) for i in range(TILE_BUFFERS)]
    x_free: list[Token | None] = [None] * TILE_BUFFERS
    y_free: list[Token | None] = [None] * TILE_BUFFERS
    pending: list[tuple[int, int, Token | None]] = []

    def flush() -> None:
        for r0, n, done in pending:
            slot = (r0 // PARTITIONS) % TILE_BUFFERS
            y_free[slot] = pb.dma(
                y[r0 : r0 + n, 0:cols], ys[slot][0:n, 0:cols], wait=(done,), signal="st"
            )
        pending.clear()

    for tile, r0 in enumerate(range(0, rows, PARTITIONS)):
        n = min(PARTITIONS, rows - r0)
        slot = tile % TILE_BUFFERS
        loaded = pb.dma(
            xs[slot][0:n, 0:cols], x[r0 : r0 + n, 0:cols], wait=(x_free[slot],), signal="ld"
        )
        flush()
        done = body(slot, n, xs[slot], ys[slot], (loaded, y_free[slot]))
        x_free[slot] = done
        pending.append((r0, n, done))
    flush()
    return pb.build()


def elementwise(rows: int, cols: int, dtype: str = "fp32", func: str = "gelu") -> Program:
    """y = func(x) on the scalar engine: a streaming op, bound by DMA/HBM."""

    def make_body(pb: ProgramBuilder) -> Body:
        def body(slot: int, n: int, x: Buffer, y: Buffer, waits: Waits) -> Token | None:
            return pb.activation(y[0:n, 0:cols], x[0:n, 0:cols], func, wait=waits, signal="s")

        return body

    return _rowwise(f"elementwise-{func}", rows, cols, dtype, make_body)


def softmax(rows: int, cols: int, dtype: str = "fp32") -> Program:
    """y = exp(x - max) / sum(exp(x - max)) per row."""

    def make_body(pb: ProgramBuilder) -> Body:
        mx = [pb.sbuf(f"max{i}", PARTITIONS, 1, "fp32") for i in range(TILE_BUFFERS)]
        sm = [pb.sbuf(f"sum{i}", PARTITIONS, 1, "fp32") for i in range(TILE_BUFFERS)]

        def body(slot: int, n: int, x: Buffer, y: Buffer, waits: Waits) -> Token | None:
            xv, yv = x[0:n, 0:cols], y[0:n, 0:cols]
            m, s = mx[slot][0:n, 0:1], sm[slot][0:n, 0:1]
            t = pb.reduce(m, xv, "max", wait=waits, signal="v")
            t = pb.tensor_scalar(m, m, -1.0, "multiply", wait=(t,), signal="v")
            t = pb.activation(yv, xv, "exp", bias=m, row_sum=s, wait=(t,), signal="s")
            t = pb.activation(s, s, "reciprocal", wait=(t,), signal="s")
            return pb.tensor_scalar(yv, yv, s, "multiply", wait=(t,), signal="v")

        return body

    return _rowwise("softmax", rows, cols, dtype, make_body)


def layernorm(rows: int, cols: int, dtype: str = "fp32", eps: float = 1e-5) -> Program:
    """y = (x - mean) / sqrt(var + eps) * gamma + beta per row; gamma and beta
    are stored broadcast to [128, cols] in HBM and loaded once."""

    def make_body(pb: ProgramBuilder) -> Body:
        gamma_hbm = pb.hbm("gamma", PARTITIONS, cols, dtype)
        beta_hbm = pb.hbm("beta", PARTITIONS, cols, dtype)
        gamma = pb.sbuf("gamma_sb", PARTITIONS, cols, dtype)
        beta = pb.sbuf("beta_sb", PARTITIONS, cols, dtype)
        params = pb.dma(gamma.all(), gamma_hbm.all(), signal="ld")
        params = pb.dma(beta.all(), beta_hbm.all(), signal="ld")
        sq = [pb.sbuf(f"sq{i}", PARTITIONS, cols, "fp32") for i in range(TILE_BUFFERS)]
        mean = [pb.sbuf(f"mean{i}", PARTITIONS, 1, "fp32") for i in range(TILE_BUFFERS)]
        rstd = [pb.sbuf(f"rstd{i}", PARTITIONS, 1, "fp32") for i in range(TILE_BUFFERS)]

        def body(slot: int, n: int, x: Buffer, y: Buffer, waits: Waits) -> Token | None:
            xv, yv, sv = x[0:n, 0:cols], y[0:n, 0:cols], sq[slot][0:n, 0:cols]
            mu, rs = mean[slot][0:n, 0:1], rstd[slot][0:n, 0:1]
            t = pb.reduce(mu, xv, "sum", wait=(*waits, params), signal="v")
            t = pb.tensor_scalar(mu, mu, -1.0 / cols, "multiply", wait=(t,), signal="v")
            t = pb.tensor_scalar(sv, xv, mu, "add", wait=(t,), signal="v")
            t2 = pb.activation(yv, sv, "square", wait=(t,), signal="s")
            t = pb.reduce(rs, yv, "sum", wait=(t2,), signal="v")
            t2 = pb.activation(rs, rs, "rsqrt", scale=1.0 / cols, bias=eps, wait=(t,), signal="s")
            t = pb.tensor_scalar(sv, sv, rs, "multiply", wait=(t2,), signal="v")
            t = pb.tensor_tensor(sv, sv, gamma[0:n, 0:cols], "multiply", wait=(t,), signal="v")
            return pb.tensor_tensor(
                yv, sv, beta[0:n, 0:cols], "add", queue=Queue.GPSIMD, wait=(t,), signal="g"
            )

        return body

    return _rowwise("layernorm", rows, cols, dtype, make_body)
