"""The data path: execute a program on numpy arrays.

Values are held as float32 and rounded to each buffer's dtype on every write
(BF16 round-to-nearest-even, FP16, FP8 E4M3); PSUM accumulates in FP32.
Matmul operands are quantised to the matmul dtype first: TF32 keeps 10
mantissa bits, FP8 is E4M3, MXFP8/MXFP4 are blocks of 32 values along the
contraction axis sharing a power-of-two (E8M0) scale with E4M3/E2M1 elements.
Structured sparsity keeps the k largest of every m stationary values along the
contraction axis. Timing never depends on this module.
"""

from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

from simdevice.isa import Op, Program, ProgramError, View

Array = npt.NDArray[np.float32]
MX_BLOCK = 32


def round_bf16(x: npt.ArrayLike) -> Array:
    """Round to BF16 (nearest, ties to even), returned as float32."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) & np.uint64(
        0xFFFF0000
    )
    out: Array = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isfinite(f), out, f)


def round_tf32(x: npt.ArrayLike) -> Array:
    f = np.ascontiguousarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + np.uint64(0xFFF) + ((bits >> np.uint64(13)) & np.uint64(1))) & np.uint64(
        0xFFFFE000
    )
    out: Array = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isfinite(f), out, f)


def round_minifloat(
    x: npt.ArrayLike, mantissa_bits: int, min_exponent: int, max_value: float
) -> Array:
    """Round to a small float format (saturating), subnormals included."""
    f = np.asarray(x, dtype=np.float64)
    mag = np.abs(f)
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    exponent = np.maximum(exponent, min_exponent)
    step = np.exp2(exponent - mantissa_bits)
    q = np.clip(np.round(f / step) * step, -max_value, max_value)
    out: Array = q.astype(np.float32)
    return out


def round_fp8(x: npt.ArrayLike) -> Array:
    """FP8 E4M3: 3 mantissa bits, largest 448."""
    return round_minifloat(x, 3, -6, 448.0)


def round_fp4(x: npt.ArrayLike) -> Array:
    """FP4 E2M1: 1 mantissa bit, largest 6."""
    return round_minifloat(x, 1, 0, 6.0)


def quantize_mx(x: npt.ArrayLike, element: str) -> Array:
    """MX block scaling along axis 0 (the contraction axis) in blocks of 32."""
    f = np.asarray(x, dtype=np.float32)
    rounder, emax = (round_fp8, 8) if element == "fp8" else (round_fp4, 2)
    rows = f.shape[0]
    pad = (-rows) % MX_BLOCK
    padded = np.pad(f, ((0, pad), (0, 0)))
    blocks = padded.reshape(-1, MX_BLOCK, f.shape[1])
    amax = np.abs(blocks).max(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        shared = np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - emax
    scale = np.exp2(shared)
    q = rounder(blocks / scale) * scale
    out: Array = q.reshape(padded.shape)[:rows].astype(np.float32)
    return out


def quantize(x: npt.ArrayLike, dtype: str) -> Array:
    """Values as a matmul of `dtype` sees them."""
    rounders: dict[str, Callable[[npt.ArrayLike], Array]] = {
        "fp32": lambda v: np.asarray(v, dtype=np.float32),
        "tf32": round_tf32,
        "bf16": round_bf16,
        "fp16": lambda v: np.asarray(v, dtype=np.float16).astype(np.float32),
        "fp8": round_fp8,
        "mxfp8": lambda v: quantize_mx(v, "fp8"),
        "mxfp4": lambda v: quantize_mx(v, "fp4"),
    }
    if dtype not in rounders:
        raise ProgramError(f"dtype: {dtype!r} has no numerics")
    return rounders[dtype](x)


def store(x: npt.ArrayLike, dtype: str) -> Array:
    """Round a value written into a buffer of `dtype` (MX values are kept
    as written; they are quantised when a matmul reads them)."""
    if dtype in ("mxfp8", "mxfp4"):
        return np.asarray(x, dtype=np.float32)
    return quantize(x, dtype)


def sparsify(stationary: Array, pattern: str) -> Array:
    """Keep the `k` largest magnitudes of every `m` values along axis 0."""
    if pattern == "dense":
        return stationary
    keep, group = (int(v) for v in pattern.split(":"))
    rows = stationary.shape[0]
    pad = (-rows) % group
    padded = np.pad(stationary, ((0, pad), (0, 0)))
    blocks = padded.reshape(-1, group, stationary.shape[1])
    order = np.argsort(-np.abs(blocks), axis=1, kind="stable")
    mask = np.zeros_like(blocks, dtype=bool)
    np.put_along_axis(mask, order[:, :keep, :], True, axis=1)
    out: Array = np.where(mask, blocks, 0.0).reshape(padded.shape)[:rows].astype(np.float32)
    return out


def _gelu(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    result: npt.NDArray[np.float64] = (
        0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    )
    return result


ACTIVATION_FUNCS: Mapping[str, Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]] = {
    "identity": lambda x: x,
    "exp": np.exp,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": _gelu,
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "square": np.square,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x,
}
ALU_FUNCS: Mapping[
    str, Callable[[npt.NDArray[np.float64], npt.NDArray[np.float64]], npt.NDArray[np.float64]]
] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "divide": np.divide,
}


class Memory:
    """Every buffer of a program as float32 arrays."""

    def __init__(self, program: Program, inputs: Mapping[str, npt.ArrayLike]) -> None:
        self.arrays: dict[str, Array] = {}
        for name, buf in program.buffers.items():
            if name in inputs:
                value = np.asarray(inputs[name], dtype=np.float32)
                if value.shape != (buf.rows, buf.cols):
                    raise ProgramError(
                        f"inputs: {name} has shape {value.shape}, the program wants "
                        f"{(buf.rows, buf.cols)}"
                    )
                self.arrays[name] = store(value, buf.dtype)
            else:
                self.arrays[name] = np.zeros((buf.rows, buf.cols), dtype=np.float32)
        unknown = set(inputs) - set(program.buffers)
        if unknown:
            raise ProgramError(f"inputs: {sorted(unknown)[0]} is not a buffer of {program.name}")

    def read(self, v: View) -> npt.NDArray[np.float64]:
        return self.arrays[v.buffer.name][v.r0 : v.r1, v.c0 : v.c1].astype(np.float64)

    def write(self, v: View, value: npt.ArrayLike) -> None:
        self.arrays[v.buffer.name][v.r0 : v.r1, v.c0 : v.c1] = store(value, v.buffer.dtype)

    def operand(self, x: View | float) -> npt.NDArray[np.float64] | float:
        return self.read(x) if isinstance(x, View) else x


def execute(program: Program, inputs: Mapping[str, npt.ArrayLike]) -> dict[str, Array]:
    """Run `program`'s data path in program order (a valid order of its
    semaphores); returns every HBM buffer afterwards."""
    mem = Memory(program, inputs)
    stationary: list[npt.NDArray[np.float64]] | None = None
    for op, operands in zip(program.op, program.operands, strict=True):
        if op in (Op.DMA_LOAD, Op.DMA_STORE):
            dst, src = operands
            mem.write(dst, mem.read(src))
        elif op == Op.DMA_ACCUMULATE:
            dst, src = operands
            mem.write(dst, mem.read(dst) + mem.read(src))
        elif op == Op.LOAD_STATIONARY:
            stationary = [mem.read(tile) for tile in operands]
        elif op == Op.MULTIPLY_MOVING:
            dst, movings, _, dtype, pattern, accumulate = operands
            if stationary is None:
                raise ProgramError("stationary: multiply_moving before any load_stationary")
            # each contraction tile is quantised (and pruned) on its own; the
            # array sums the tiles' products in FP32
            product = sum(
                sparsify(quantize(s, dtype), pattern).astype(np.float64).T
                @ quantize(mem.read(moving), dtype).astype(np.float64)
                for s, moving in zip(stationary, movings, strict=True)
            )
            product = np.asarray(product).astype(np.float32).astype(np.float64)
            mem.write(dst, mem.read(dst) + product if accumulate else product)
        elif op == Op.TRANSPOSE:
            dst, src = operands
            mem.write(dst, mem.read(src).T)
        elif op in (Op.TENSOR_TENSOR, Op.TENSOR_SCALAR):
            dst, a, b, alu = operands
            mem.write(dst, ALU_FUNCS[alu](mem.read(a), np.asarray(mem.operand(b))))
        elif op == Op.ACTIVATION:
            dst, src, func, scale, bias, row_sum = operands
            x = mem.read(src) * mem.operand(scale) + mem.operand(bias)
            mem.write(dst, ACTIVATION_FUNCS[func](x))
            if row_sum is not None:
                mem.write(row_sum, mem.read(dst).sum(axis=1, keepdims=True))
        elif op == Op.REDUCE:
            dst, src, reduce_op = operands
            values = mem.read(src)
            reduced = values.sum(axis=1) if reduce_op == "sum" else values.max(axis=1)
            mem.write(dst, reduced[:, None])
        elif op == Op.COPY:
            dst, src = operands
            mem.write(dst, mem.read(src))
    return {n: a for n, a in mem.arrays.items() if program.buffers[n].memory == "hbm"}
