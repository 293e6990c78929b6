"""The instruction set of a simulated NeuronCore and the builder kernels use.

A program is columnar (one list per instruction field) so timing can be
computed from the descriptors with numpy, without a Python object per
instruction. Buffers live in HBM, SBUF or PSUM; views of them are bounds
checked when an instruction is built, so a bad kernel fails at build time.
Dependencies between the five in-order queues are semaphores: an instruction
may signal one semaphore on completion and wait for others to reach a value.
"""

import gc
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

PARTITIONS = 128  # SBUF/PSUM partitions and the systolic array's edge
PSUM_BANKS = 8
PSUM_BANK_BYTES = 2048  # per partition
MOVING_FREE_MAX = 512  # MultiplyMoving free size


class ProgramError(ValueError):
    """A program that cannot run; the message starts with the offending field."""


class CapacityError(ProgramError):
    """SBUF or PSUM overflow: the program asks for more on-chip memory than there is."""


class Queue(IntEnum):
    """The five in-order instruction queues of a core."""

    TENSOR = 0
    VECTOR = 1
    SCALAR = 2
    GPSIMD = 3
    SYNC = 4  # Sync/DMA: triggers DMA transfers


QUEUE_NAMES: tuple[str, ...] = ("tensor", "vector", "scalar", "gpsimd", "sync")


class Op(IntEnum):
    DMA_LOAD = 0  # HBM -> SBUF
    DMA_STORE = 1  # SBUF -> HBM
    DMA_ACCUMULATE = 2  # HBM -> SBUF, read-add-write into SBUF
    LOAD_STATIONARY = 3
    MULTIPLY_MOVING = 4
    TRANSPOSE = 5  # on the PE array, into PSUM
    TENSOR_TENSOR = 6  # elementwise a (op) b
    TENSOR_SCALAR = 7  # elementwise a (op) per-partition scalar
    ACTIVATION = 8  # func(scale * a + bias)
    REDUCE = 9  # along the free axis -> [P, 1]
    COPY = 10  # copy/cast, e.g. PSUM -> SBUF
    NOP = 11  # a semaphore-only instruction


# Plain-int aliases for the builder's hot paths (an enum member lookup costs
# more than the rest of an emit's bookkeeping for it).
_TENSOR, _SYNC = int(Queue.TENSOR), int(Queue.SYNC)
_LOAD_STATIONARY, _MULTIPLY_MOVING = int(Op.LOAD_STATIONARY), int(Op.MULTIPLY_MOVING)
_TENSOR_TENSOR, _ACTIVATION = int(Op.TENSOR_TENSOR), int(Op.ACTIVATION)

# Storage and matmul data types and their bytes per element.
DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "mxfp4")
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "mxfp8": 1.0 + 1.0 / 32,  # one E8M0 scale per 32 elements
    "mxfp4": 0.5 + 1.0 / 32,
}
DTYPE_CODE: dict[str, int] = {name: i for i, name in enumerate(DTYPES)}
# BF16-equivalent FLOPs per FLOP, as AWS counts utilization.
BF16_EQUIVALENT: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 1.0,
    "bf16": 1.0,
    "fp16": 1.0,
    "fp8": 0.5,
    "mxfp8": 0.25,
    "mxfp4": 0.25,
}
# Structured sparsity k:m (k non-zeros of every m along the contraction).
SPARSITY: tuple[str, ...] = ("dense", "4:16", "4:12", "4:8", "2:8", "2:4", "1:4", "1:2")
SPARSITY_CODE: dict[str, int] = {name: i for i, name in enumerate(SPARSITY)}
# 128-row contraction tiles one matmul instruction takes: each PE multiplies
# two FP8 pairs or four MX pairs per cycle (the double-FP8 and quad-MX modes),
# so the instruction contracts over 256 or 512 rows in the time BF16 takes for
# 128; a k:m sparse stationary packs m/k rows into each kept one. At most 4.
DTYPE_TILES: dict[str, int] = {"fp8": 2, "mxfp8": 4, "mxfp4": 4}
MAX_CONTRACTION_TILES = 4


def contraction_tiles(dtype: str, sparsity: str = "dense") -> int:
    """How many 128-row contraction tiles one matmul of `dtype` takes."""
    tiles = DTYPE_TILES.get(dtype, 1)
    if sparsity == "dense":
        return tiles
    nonzero, group = (int(x) for x in sparsity.split(":"))
    return max(tiles, min(tiles * group // nonzero, MAX_CONTRACTION_TILES))


def _sparsity_density(sparsity: str) -> float:
    if sparsity == "dense":
        return 1.0
    nonzero, group = (int(x) for x in sparsity.split(":"))
    return nonzero / group


# (contraction tiles, descriptor code, density) of every matmul kind, looked
# up once per matmul instead of recomputed.
_MATMUL_KINDS: dict[tuple[str, str], tuple[int, float, float]] = {
    (dtype, sparsity): (
        contraction_tiles(dtype, sparsity),
        float(DTYPE_CODE[dtype] * 16 + SPARSITY_CODE[sparsity]),
        _sparsity_density(sparsity),
    )
    for dtype in DTYPES
    for sparsity in SPARSITY
}

ALU_OPS: tuple[str, ...] = ("add", "subtract", "multiply", "max", "min", "divide")
ACTIVATIONS: tuple[str, ...] = (
    "identity",
    "exp",
    "tanh",
    "sigmoid",
    "relu",
    "gelu",
    "silu",
    "square",
    "sqrt",
    "rsqrt",
    "reciprocal",
)
REDUCE_OPS: tuple[str, ...] = ("sum", "max")
TRANSCENDENTAL: frozenset[str] = frozenset(
    {"exp", "tanh", "sigmoid", "gelu", "silu", "sqrt", "rsqrt", "reciprocal"}
)
# Elementwise cost class, the descriptor `b` of vector/scalar/gpsimd ops: one
# function kind plus flags; simdevice.timing turns it into cycles per element.
EXP = 1  # exp: the scalar engine's table, or the vector engine's fast exponential
TRANSCENDENTAL_OTHER = 2  # any other table function: scalar only, emulated elsewhere
NARROW = 4  # every tensor operand is 16 bits or narrower (the engines' fast modes)
IN_PSUM = 8  # an operand is in PSUM
TWO_INPUTS = 16  # reads two tensors (tensor_tensor)
IS_ACTIVATION = 32  # an activation (scalar engine's fast mode is for copy/tensor_scalar)
NARROW_DTYPES: frozenset[str] = frozenset({"bf16", "fp16", "fp8"})


@dataclass(frozen=True)
class Buffer:
    """A 2-D tensor: [partitions, free] on chip, [rows, cols] in HBM."""

    name: str
    memory: str
    rows: int
    cols: int
    dtype: str
    offset: int = 0  # byte offset inside each partition (SBUF/PSUM)

    @property
    def bytes_per_row(self) -> int:
        return round(self.cols * DTYPE_BYTES[self.dtype])

    def __getitem__(self, key: tuple[slice, slice]) -> "View":
        rows, cols = key
        r0, r1, c0, c1 = rows.start, rows.stop, cols.start, cols.stop
        # Kernels slice with explicit in-range bounds; only other slices need
        # the general path (and its error messages).
        if (
            type(r0) is int
            and type(r1) is int
            and type(c0) is int
            and type(c1) is int
            and 0 <= r0 < r1 <= self.rows
            and 0 <= c0 < c1 <= self.cols
        ):
            return _new_tuple(View, (self, r0, r1, c0, c1))
        return self._checked_view(rows, cols)

    def _checked_view(self, rows: slice, cols: slice) -> "View":
        r0, r1, _ = rows.indices(self.rows)
        c0, c1, _ = cols.indices(self.cols)
        for name, lo, hi, limit, start, stop in (
            ("rows", r0, r1, self.rows, rows.start, rows.stop),
            ("cols", c0, c1, self.cols, cols.start, cols.stop),
        ):
            if (start is not None and not 0 <= start < limit) or (
                stop is not None and not 0 < stop <= limit
            ):
                raise ProgramError(
                    f"{name}: [{start}:{stop}] is outside {self.name} ({limit} {name}); "
                    "no silent wrap-around"
                )
            if hi <= lo:
                raise ProgramError(f"{name}: empty slice [{start}:{stop}] of {self.name}")
        return View(self, r0, r1, c0, c1)

    def all(self) -> "View":
        return View(self, 0, self.rows, 0, self.cols)


class View(NamedTuple):
    """A rectangle of a buffer (a named tuple: kernels make many of them)."""

    buffer: Buffer
    r0: int
    r1: int
    c0: int
    c1: int

    @property
    def rows(self) -> int:
        return self.r1 - self.r0

    @property
    def cols(self) -> int:
        return self.c1 - self.c0

    @property
    def shape(self) -> tuple[int, int]:
        return (self.r1 - self.r0, self.c1 - self.c0)

    @property
    def nbytes(self) -> float:
        return self.rows * self.cols * DTYPE_BYTES[self.buffer.dtype]


# View's generated __new__ is a Python call; kernels make views by the million.
_new_tuple = tuple.__new__


class Token(NamedTuple):
    """A semaphore value to wait for: `semaphore` has been signalled `value` times."""

    semaphore: str
    value: int


@dataclass(frozen=True)
class Columns:
    """The numeric instruction fields as numpy arrays."""

    queue: npt.NDArray[np.int64]
    op: npt.NDArray[np.int64]
    a: npt.NDArray[np.float64]
    b: npt.NDArray[np.float64]
    c: npt.NDArray[np.float64]
    flops: npt.NDArray[np.float64]


@dataclass
class Program:
    """Columnar instruction stream plus the buffers it uses.

    `a`, `b`, `c` are numeric descriptors whose meaning depends on the op (see
    simdevice.timing): DMA bytes and bytes per partition; for the PE array the
    moving free size (transpose: partitions), the dtype/sparsity code and the
    stationary columns (transpose: free size); elementwise free size and cost
    class.
    """

    name: str
    # Typed arrays: appending is as cheap as to a list, and numpy reads them
    # without a conversion per element.
    queue: "array[int]" = field(default_factory=lambda: array("q"))
    op: "array[int]" = field(default_factory=lambda: array("q"))
    a: "array[float]" = field(default_factory=lambda: array("d"))
    b: "array[float]" = field(default_factory=lambda: array("d"))
    c: "array[float]" = field(default_factory=lambda: array("d"))
    flops: "array[float]" = field(default_factory=lambda: array("d"))  # BF16-equivalent FLOPs
    # Signal events are numbered in program order (the n-th instruction that
    # signals anything makes event n); waits name the events they wait for.
    waits: list[tuple[int, ...]] = field(default_factory=list)
    signal: list[int] = field(default_factory=list)  # sem id or -1
    operands: list[tuple[Any, ...]] = field(default_factory=list)  # for the data path
    buffers: dict[str, Buffer] = field(default_factory=dict)

    _columns: Columns | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.op)

    def columns(self) -> Columns:
        """numpy views of the descriptors, made once the program stops growing."""
        if self._columns is None or len(self._columns.op) != len(self.op):
            self._columns = Columns(
                queue=np.frombuffer(self.queue, dtype=np.int64).copy(),
                op=np.frombuffer(self.op, dtype=np.int64).copy(),
                a=np.frombuffer(self.a, dtype=np.float64).copy(),
                b=np.frombuffer(self.b, dtype=np.float64).copy(),
                c=np.frombuffer(self.c, dtype=np.float64).copy(),
                flops=np.frombuffer(self.flops, dtype=np.float64).copy(),
            )
        return self._columns

    def sbuf_bytes_per_partition(self) -> int:
        return sum(b.bytes_per_row for b in self.buffers.values() if b.memory == "sbuf")

    def psum_bytes_per_partition(self) -> int:
        return sum(b.bytes_per_row for b in self.buffers.values() if b.memory == "psum")

    def hbm_bytes(self) -> int:
        return sum(b.rows * b.bytes_per_row for b in self.buffers.values() if b.memory == "hbm")


class ProgramBuilder:
    """Emit instructions for one core. Every emit may `wait` for tokens and
    `signal` a semaphore; it returns the token of that signal (or None)."""

    def __init__(self, name: str) -> None:
        self.program = Program(name)
        self._sem_ids: dict[str, int] = {}
        self._sem_events: list[list[int]] = []  # event ids of each semaphore's signals
        self._sem_queue: list[int] = []
        self._events = 0
        self._sbuf_offset = 0
        self._psum_offset = 0
        self._stationary: tuple[View, ...] | None = None
        # One tuple per instruction (queue, op, a, b, c, flops, waits, signal,
        # operands): a single append per emit; build() splits the columns.
        self._rows: list[tuple[Any, ...]] = []

    # -- buffers -------------------------------------------------------------
    def _buffer(self, name: str, memory: str, rows: int, cols: int, dtype: str) -> Buffer:
        if name in self.program.buffers:
            raise ProgramError(f"name: buffer {name!r} is declared twice; use unique names")
        if dtype not in DTYPE_BYTES:
            raise ProgramError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
        if rows < 1 or cols < 1:
            raise ProgramError(f"shape: {name} must have rows and cols >= 1, got {rows}x{cols}")
        if memory != "hbm" and rows > PARTITIONS:
            raise ProgramError(
                f"partitions: {name} has {rows} partitions; on-chip buffers have at most "
                f"{PARTITIONS}"
            )
        offset = 0
        buf = Buffer(name, memory, rows, cols, dtype)
        if memory == "sbuf":
            offset, self._sbuf_offset = self._sbuf_offset, self._sbuf_offset + buf.bytes_per_row
        elif memory == "psum":
            offset, self._psum_offset = self._psum_offset, self._psum_offset + buf.bytes_per_row
        buf = Buffer(name, memory, rows, cols, dtype, offset)
        self.program.buffers[name] = buf
        return buf

    def hbm(self, name: str, rows: int, cols: int, dtype: str = "bf16") -> Buffer:
        return self._buffer(name, "hbm", rows, cols, dtype)

    def sbuf(self, name: str, partitions: int, free: int, dtype: str = "bf16") -> Buffer:
        return self._buffer(name, "sbuf", partitions, free, dtype)

    def psum(self, name: str, partitions: int, free: int) -> Buffer:
        """PSUM accumulates in FP32."""
        return self._buffer(name, "psum", partitions, free, "fp32")

    # -- emission ------------------------------------------------------------
    def _emit(  # noqa: PLR0917 - private, called positionally by every op
        self,
        queue: int,
        op: int,
        a: float,
        b: float,
        flops: float,
        operands: tuple[Any, ...],
        wait: tuple[Token | None, ...],
        signal: str | None,
        c: float = 0.0,
    ) -> Token | None:
        waits = []
        if wait:
            sem_ids, sem_events = self._sem_ids, self._sem_events
            for token in wait:
                if token is None:
                    continue
                sem = sem_ids.get(token[0])
                if sem is None or not 1 <= token[1] <= len(sem_events[sem]):
                    raise ProgramError(
                        f"wait: semaphore {token.semaphore!r} is never signalled {token.value} "
                        "times before this instruction; wait only for tokens already emitted"
                    )
                waits.append(sem_events[sem][token[1] - 1])
        sem_id = -1
        result = None
        if signal is not None:
            sem_id = self._sem_ids.setdefault(signal, len(self._sem_ids))
            if sem_id == len(self._sem_events):
                self._sem_events.append([])
                self._sem_queue.append(int(queue))
            elif self._sem_queue[sem_id] != queue:
                raise ProgramError(
                    f"signal: semaphore {signal!r} is signalled from the "
                    f"{QUEUE_NAMES[self._sem_queue[sem_id]]} queue already; use one "
                    "semaphore per producing queue"
                )
            events = self._sem_events[sem_id]
            events.append(self._events)
            self._events += 1
            result = _new_tuple(Token, (signal, len(events)))
        self._rows.append((queue, op, a, b, c, flops, tuple(waits), sem_id, operands))
        return result

    @staticmethod
    def _same_shape(field_name: str, x: View, y: View) -> None:
        if x.r1 - x.r0 != y.r1 - y.r0 or x.c1 - x.c0 != y.c1 - y.c0:
            raise ProgramError(f"{field_name}: shapes differ, {x.shape} vs {y.shape}")

    @staticmethod
    def _on_chip(field_name: str, v: View, memories: tuple[str, ...] = ("sbuf", "psum")) -> None:
        if v.buffer.memory not in memories:
            raise ProgramError(
                f"{field_name}: {v.buffer.name} is in {v.buffer.memory}; "
                f"expected {' or '.join(memories)}"
            )

    def dma(
        self,
        dst: View,
        src: View,
        *,
        accumulate: bool = False,
        wait: tuple[Token | None, ...] = (),
        signal: str | None = None,
    ) -> Token | None:
        """Move a tile between HBM and SBUF (either way); `accumulate` adds into SBUF."""
        self._same_shape("dst", dst, src)
        if dst.buffer.dtype != src.buffer.dtype:
            raise ProgramError(
                f"dtype: DMA copies bytes; {src.buffer.name} is {src.buffer.dtype} but "
                f"{dst.buffer.name} is {dst.buffer.dtype}"
            )
        kinds = (src.buffer.memory, dst.buffer.memory)
        if kinds == ("hbm", "sbuf"):
            op = Op.DMA_ACCUMULATE if accumulate else Op.DMA_LOAD
        elif kinds == ("sbuf", "hbm") and not accumulate:
            op = Op.DMA_STORE
        else:
            raise ProgramError(
                f"dst: DMA runs HBM->SBUF (optionally accumulating) or SBUF->HBM, "
                f"not {kinds[0]}->{kinds[1]}"
            )
        on_chip = dst if op != Op.DMA_STORE else src
        per_partition = on_chip.cols * DTYPE_BYTES[on_chip.buffer.dtype]
        return self._emit(Queue.SYNC, op, dst.nbytes, per_partition, 0.0, (dst, src), wait, signal)

    def load_stationary(
        self,
        stationary: View | tuple[View, ...],
        *,
        wait: tuple[Token | None, ...] = (),
        signal: str | None = None,
    ) -> Token | None:
        """Load weights into the PE array: one [K<=128, M<=128] tile, or up to
        four contraction tiles of the same M for a packed (FP8, MX, sparse)
        matmul. It runs in the background of the previous matmul."""
        tiles = (stationary,) if isinstance(stationary, View) else stationary
        if not 1 <= len(tiles) <= MAX_CONTRACTION_TILES:
            raise ProgramError(
                f"stationary: 1 to {MAX_CONTRACTION_TILES} contraction tiles, got {len(tiles)}"
            )
        first = tiles[0]
        columns = first.c1 - first.c0
        for tile in tiles:
            if tile.buffer.memory != "sbuf":
                self._on_chip("stationary", tile, ("sbuf",))
            cols = tile.c1 - tile.c0
            if cols > PARTITIONS:
                raise ProgramError(f"stationary: {cols} columns > {PARTITIONS}")
            if cols != columns:
                raise ProgramError(
                    f"stationary: contraction tiles have {columns} and {cols} columns"
                )
        self._stationary = tiles
        return self._emit(
            _TENSOR,
            _LOAD_STATIONARY,
            0.0,
            float(columns),
            0.0,
            tiles,
            wait,
            signal,
            c=float(columns),
        )

    def multiply_moving(
        self,
        dst: View,
        moving: View | tuple[View, ...],
        *,
        dtype: str = "bf16",
        sparsity: str = "dense",
        accumulate: bool = False,
        wait: tuple[Token | None, ...] = (),
        signal: str | None = None,
    ) -> Token | None:
        """dst[M, N] (+)= sum over contraction tiles of stationary[K, M].T @ moving[K, N],
        with the tiles of the last LoadStationary; FP8, MX and sparse matmuls
        take up to `contraction_tiles(dtype, sparsity)` tiles at once."""
        movings = (moving,) if isinstance(moving, View) else moving
        for tile in movings:
            if tile.buffer.memory != "sbuf":
                self._on_chip("moving", tile, ("sbuf",))
        if dst.buffer.memory != "psum":
            self._on_chip("dst", dst, ("psum",))
        kind = _MATMUL_KINDS.get((dtype, sparsity))
        if kind is None:
            if dtype not in BF16_EQUIVALENT:
                raise ProgramError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
            raise ProgramError(f"sparsity: {sparsity!r} is not one of {', '.join(SPARSITY)}")
        limit, code, density = kind
        stationary = self._stationary
        if stationary is None:
            raise ProgramError("stationary: multiply_moving needs a load_stationary before it")
        if len(movings) > limit:
            raise ProgramError(
                f"moving: {len(movings)} contraction tiles, but a {dtype} {sparsity} matmul "
                f"takes at most {limit}"
            )
        if len(movings) != len(stationary):
            raise ProgramError(
                f"moving: {len(movings)} contraction tiles do not match the stationary's "
                f"{len(stationary)}"
            )
        first = stationary[0]
        m = first.c1 - first.c0
        first = movings[0]
        n = first.c1 - first.c0
        k = 0
        for s_tile, m_tile in zip(stationary, movings, strict=True):
            rows = m_tile.r1 - m_tile.r0
            if rows != s_tile.r1 - s_tile.r0:
                raise ProgramError(
                    f"moving: {rows} partitions do not match the stationary's {s_tile.rows}"
                )
            if m_tile.c1 - m_tile.c0 != n:
                raise ProgramError(f"moving: contraction tiles have {n} and {m_tile.cols} columns")
            k += rows
        if n > MOVING_FREE_MAX:
            raise ProgramError(f"moving: free size {n} > {MOVING_FREE_MAX}; split the tile")
        if dst.r1 - dst.r0 != m or dst.c1 - dst.c0 != n:
            raise ProgramError(f"dst: shape {dst.shape} should be {(m, n)}")
        if dst.c0 // (PSUM_BANK_BYTES // 4) != (dst.c1 - 1) // (PSUM_BANK_BYTES // 4):
            raise ProgramError(
                f"dst: columns [{dst.c0}, {dst.c1}) cross a PSUM bank "
                f"({PSUM_BANK_BYTES // 4} FP32 per partition); align the tile to a bank"
            )
        # Count the FLOPs the array really does: the non-zeros of a sparse tile.
        flops = 2.0 * k * m * n * density * BF16_EQUIVALENT[dtype]
        return self._emit(
            _TENSOR,
            _MULTIPLY_MOVING,
            float(n),
            code,
            flops,
            (dst, movings, stationary, dtype, sparsity, accumulate),
            wait,
            signal,
            c=float(m),
        )

    def transpose(
        self,
        dst: View,
        src: View,
        *,
        wait: tuple[Token | None, ...] = (),
        signal: str | None = None,
    ) -> Token | None:
        """dst[F, P] = src[P, F].T on the PE array (an identity matmul), into PSUM."""
        self._on_chip("src", src, ("sbuf",))
        self._on_chip("dst", dst, ("psum",))
        if dst.shape != (src.cols, src.rows):
            raise ProgramError(f"dst: shape {dst.shape} should be {(src.cols, src.rows)}")
        if src.cols > PARTITIONS:
            raise ProgramError(f"src: {src.cols} columns > {PARTITIONS}")
        self._stationary = None  # the identity now occupies the PE array
        return self._emit(
            Queue.TENSOR,
            Op.TRANSPOSE,
            float(src.rows),
            float(DTYPE_CODE["bf16"] * 16),
            0.0,
            (dst, src),
            wait,
            signal,
            c=float(src.cols),
        )

    def _elementwise(  # noqa: PLR0917
        self,
        queue: Queue,
        op: Op,
        dst: View,
        free: int,
        function: int,
        operands: tuple[Any, ...],
        wait: tuple[Token | None, ...],
        signal: str | None,
    ) -> Token | None:
        """Emit a vector/scalar/gpsimd op; its cost class is `function` (0,
        EXP or TRANSCENDENTAL_OTHER) plus the flags its operands set."""
        if queue in (_TENSOR, _SYNC):
            raise ProgramError("queue: elementwise ops run on the vector, scalar or gpsimd queue")
        self._on_chip("dst", dst)
        tensors = [v for v in operands if isinstance(v, View)]
        for v in tensors[1:]:
            self._on_chip("src", v)
        # [P, 1] scale, bias and row-sum columns ride along; only tiles set the rate
        tiles = [v for v in tensors if v.cols == free]
        cost = function
        if all(v.buffer.dtype in NARROW_DTYPES for v in tiles):
            cost |= NARROW
        if any(v.buffer.memory == "psum" for v in tiles):
            cost |= IN_PSUM
        if op == _TENSOR_TENSOR:
            cost |= TWO_INPUTS
        if op == _ACTIVATION:
            cost |= IS_ACTIVATION
        return self._emit(queue, op, float(free), float(cost), 0.0, operands, wait, signal)

    def tensor_tensor(
        self,
        dst: View,
        a: View,
        b: View,
        alu: str,
        *,
        queue: Queue = Queue.VECTOR,
        wait: tuple[Token | None, ...] = (),
        signal: str | None = None,
    ) -> Token | None:
        if alu not in ALU_OPS:
            raise ProgramError(f"alu: {alu!r} is not one of {', '.join(ALU_OPS)}")
        self._same_shape("a", dst, a)
        self._same_shape("b", dst, b)
        return self._elementwise(
            queue, Op.TENSOR_TENSOR, dst, dst.cols, 0, (dst, a, b, alu), wait, signal
        )

    def tensor_scalar(
        self,
        dst: View,
        a: View,
        scalar: View | float,
        alu: str,
        *,
        queue: Queue = Queue.VECTOR,
        wait: tuple[Token | None, ...] = (),
        signal: str | None = None,
    ) -> Token | None:
        """dst = a (alu) scalar, the scalar a number or a per-partition [P, 1] column."""
        if alu not in ALU_OPS:
            raise ProgramError(f"alu: {alu!r} is not one of {', '.join(ALU_OPS)}")
        self._same_shape("a", dst, a)
        if isinstance(scalar, View) and scalar.shape != (dst.rows, 1):
            raise ProgramError(f"scalar: shape {scalar.shape} should be {(dst.rows, 1)}")
        return self._elementwise(
            queue, Op.TENSOR_SCALAR, dst, dst.cols, 0, (dst, a, scalar, alu), wait, signal
        )

    def activation(
        self,
        dst: View,
        src: View,
        func: str,
        *,
        scale: View | float = 1.0,
        bias: View | float = 0.0,
        row_sum: View | None = None,
        queue: Queue = Queue.SCALAR,
        wait: tuple[Token | None, ...] = (),
        signal: str | None = None,
    ) -> Token | None:
        """dst = func(scale * src + bias); scale and bias may be [P, 1] columns.
        `row_sum` [P, 1] also receives the sum of each result row, at no extra
        cost (the engine reduces as it writes)."""
        if func not in ACTIVATIONS:
            raise ProgramError(f"func: {func!r} is not one of {', '.join(ACTIVATIONS)}")
        self._same_shape("src", dst, src)
        for name, v in (("scale", scale), ("bias", bias), ("row_sum", row_sum)):
            if isinstance(v, View) and v.shape != (dst.rows, 1):
                raise ProgramError(f"{name}: shape {v.shape} should be {(dst.rows, 1)}")
        if row_sum is not None:
            self._on_chip("row_sum", row_sum)
        function = 0
        if func == "exp":
            function = EXP
        elif func in TRANSCENDENTAL:
            function = TRANSCENDENTAL_OTHER
        return self._elementwise(
            queue,
            Op.ACTIVATION,
            dst,
            dst.cols,
            function,
            (dst, src, func, scale, bias, row_sum),
            wait,
            signal,
        )

    def reduce(
        self,
        dst: View,
        src: View,
        reduce_op: str,
        *,
        queue: Queue = Queue.VECTOR,
        wait: tuple[Token | None, ...] = (),
        signal: str | None = None,
    ) -> Token | None:
        """dst[P, 1] = reduce(src[P, F]) along the free axis."""
        if reduce_op not in REDUCE_OPS:
            raise ProgramError(f"reduce_op: {reduce_op!r} is not one of {', '.join(REDUCE_OPS)}")
        if dst.shape != (src.rows, 1):
            raise ProgramError(f"dst: shape {dst.shape} should be {(src.rows, 1)}")
        return self._elementwise(
            queue, Op.REDUCE, dst, src.cols, 0, (dst, src, reduce_op), wait, signal
        )

    def copy(
        self,
        dst: View,
        src: View,
        *,
        queue: Queue = Queue.VECTOR,
        wait: tuple[Token | None, ...] = (),
        signal: str | None = None,
    ) -> Token | None:
        """Copy (and cast to dst's dtype), e.g. evacuate PSUM into SBUF."""
        self._same_shape("src", dst, src)
        return self._elementwise(queue, Op.COPY, dst, dst.cols, 0, (dst, src), wait, signal)

    def barrier(
        self,
        queue: Queue,
        *,
        wait: tuple[Token | None, ...] = (),
        signal: str | None = None,
    ) -> Token | None:
        """A zero-cost instruction: wait for tokens and/or signal on `queue`."""
        return self._emit(queue, Op.NOP, 0.0, 0.0, 0.0, (), wait, signal)

    def build(self) -> Program:
        p = self.program
        if self._rows:
            queue, op, a, b, c, flops, waits, signal, operands = zip(*self._rows, strict=True)
            p.queue, p.op = array("q", queue), array("q", op)
            p.a, p.b, p.c, p.flops = array("d", a), array("d", b), array("d", c), array("d", flops)
            p.waits, p.signal, p.operands = list(waits), list(signal), list(operands)
        return p


@contextmanager
def collector_paused() -> Iterator[None]:
    """Build (and time) programs without the cyclic garbage collector: a large
    program is hundreds of thousands of acyclic objects (rows, views, tokens)
    that reference counting frees, and that the collector would otherwise
    scan again and again while they pile up."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
