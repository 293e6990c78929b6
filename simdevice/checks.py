"""Numerics on request: run one core's program of a workload through the data
path on seeded random inputs and compare it with a float64 reference.

Jobs ask for it with `"numerics": true`; sizes are capped because the data
path executes every instruction with numpy.
"""

import zlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from simdevice.kernels.attention import attention
from simdevice.kernels.gemm import gemm
from simdevice.kernels.rowwise import elementwise, layernorm, softmax
from simdevice.numerics import ACTIVATION_FUNCS, execute, sparsify, store

F64 = npt.NDArray[np.float64]

# Normwise relative error a result may have against float64: input rounding
# plus, for 16-bit and narrower inputs, a BF16 output.
TOLERANCE: dict[str, float] = {
    "fp32": 1e-5,
    "tf32": 2e-3,
    "bf16": 1e-2,
    "fp16": 5e-3,
    "fp8": 8e-2,
    "mxfp8": 8e-2,
    "mxfp4": 3e-1,
}
# Largest problem (per core) the data path runs for a job.
MAX_ELEMENTS = 1 << 22
MAX_GEMM_MACS = 1 << 28
MAX_ATTENTION_SEQ = 1024


@dataclass(frozen=True)
class NumericsResult:
    relative_error: float  # ||result - reference|| / ||reference||
    max_abs_error: float
    tolerance: float
    ok: bool

    def as_dict(self) -> dict[str, float | bool]:
        return {
            "relative_error": self.relative_error,
            "max_abs_error": self.max_abs_error,
            "tolerance": self.tolerance,
            "ok": self.ok,
        }


def too_large(kind: str, shape: dict[str, int]) -> str | None:
    """Why the data path would be too slow for this per-core shape, if it is."""
    if kind == "gemm" and shape["m"] * shape["n"] * shape["k"] > MAX_GEMM_MACS:
        return f"m*n*k per core at most {MAX_GEMM_MACS}"
    if (
        kind in ("elementwise", "softmax", "layernorm")
        and shape["rows"] * shape["cols"] > MAX_ELEMENTS
    ):
        return f"rows*cols per core at most {MAX_ELEMENTS}"
    if kind == "attention" and shape["seq"] > MAX_ATTENTION_SEQ:
        return f"seq at most {MAX_ATTENTION_SEQ}"
    return None


def _rng(kind: str, shape: dict[str, int], dtype: str) -> np.random.Generator:
    key = f"{kind}:{sorted(shape.items())}:{dtype}".encode()
    return np.random.default_rng(zlib.crc32(key))


def check(
    kind: str, shape: dict[str, int], dtype: str, *, sparsity: str = "dense", func: str = "gelu"
) -> NumericsResult:
    """Run one core's `kind` program of `shape` and compare with float64."""
    rng = _rng(kind, shape, dtype)
    got: F64
    want: F64
    if kind == "gemm":
        m, n, k = shape["m"], shape["n"], shape["k"]
        a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
        got = execute(gemm(m, n, k, dtype, sparsity), {"aT": a.T, "b": b})["c"].astype(np.float64)
        if sparsity != "dense":
            # the reference multiplies by the weights as the array keeps them
            a = sparsify(a.T.astype(np.float32), sparsity).T.astype(np.float64)
        want = a @ b
    elif kind == "elementwise":
        x = rng.standard_normal((shape["rows"], shape["cols"])) * 2
        program = elementwise(shape["rows"], shape["cols"], dtype, func)
        got = execute(program, {"x": x})["y"].astype(np.float64)
        want = ACTIVATION_FUNCS[func](store(x, dtype).astype(np.float64))
    elif kind == "softmax":
        x = rng.standard_normal((shape["rows"], shape["cols"])) * 3
        got = execute(softmax(shape["rows"], shape["cols"], dtype), {"x": x})["y"].astype(
            np.float64
        )
        e = np.exp(x - x.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
    elif kind == "layernorm":
        rows, cols = shape["rows"], shape["cols"]
        x = rng.standard_normal((rows, cols)) * 2 + 1
        gamma, beta = rng.standard_normal(cols), rng.standard_normal(cols)
        inputs = {"x": x, "gamma": np.tile(gamma, (128, 1)), "beta": np.tile(beta, (128, 1))}
        got = execute(layernorm(rows, cols, dtype), inputs)["y"].astype(np.float64)
        mean, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
        want = (x - mean) / np.sqrt(var + 1e-5) * gamma + beta
    elif kind == "attention":
        s, d = shape["seq"], shape["head_dim"]
        q, k_, v = (rng.standard_normal((s, d)) for _ in range(3))
        got = execute(attention(s, d, dtype), {"qT": q.T, "kT": k_.T, "v": v})["o"].astype(
            np.float64
        )
        scores = q @ k_.T / np.sqrt(d)
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        want = (p / p.sum(axis=1, keepdims=True)) @ v
    else:
        raise ValueError(
            f"kind: no numerics for {kind!r}; gemm, elementwise, softmax, layernorm, attention"
        )
    rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    tolerance = TOLERANCE[dtype]
    return NumericsResult(rel, float(np.abs(got - want).max()), tolerance, rel <= tolerance)
