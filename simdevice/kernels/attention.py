"""Attention heads on one core: O = softmax(Q K^T / sqrt(d)) V, head after head.

Q and K are stored transposed in HBM (qT, kT: [heads*d, S], head h in rows
h*d ..) so the head dimension lands on the partitions for the score matmul;
V and O are [heads*S, d]. Per 128-query tile: scores in 512-key chunks
through two PSUM banks (scaled on the way out by the scalar engine), a row
softmax, then P V with P transposed 128 keys at a time on the PE array, and
the 1/sum normalisation applied while evacuating O.

Several heads are one program, as a kernel looping over heads runs them: the
next head's Q, K, V load into a second set of buffers while the current head
computes, and query tiles of consecutive heads share the rotation of score
slots, so one head's tail overlaps the next head's first tiles.
"""

import math
from collections import deque

from simdevice.isa import (
    MOVING_FREE_MAX,
    PARTITIONS,
    Buffer,
    Program,
    ProgramBuilder,
    ProgramError,
    Queue,
    Token,
)

MAX_SEQ = 4096
SLOTS = 4  # query tiles in flight (a power of two: see KV_SETS)
# Buffer sets for Q, K, V: the next head loads while this one computes. Every
# rotation (slots, sets, PSUM banks) has a power-of-two length, so the cost
# per head repeats with a period of at most 4 heads (workloads extrapolates
# over whole periods).
KV_SETS = 2
TRANSPOSES = 4  # P^T blocks in flight; their PSUM->SBUF copies alternate engines


def _declared(seq: int, head_dim: int, dtype: str, heads: int) -> ProgramBuilder:
    """A builder with the program's buffers declared (its arguments checked)."""
    if not 1 <= seq <= MAX_SEQ:
        raise ProgramError(f"seq: must be in [1, {MAX_SEQ}] for one core, got {seq}")
    if not 1 <= head_dim <= PARTITIONS:
        raise ProgramError(f"head_dim: must be in [1, {PARTITIONS}], got {head_dim}")
    if dtype not in ("bf16", "fp16"):
        raise ProgramError(f"dtype: attention takes bf16 or fp16, got {dtype!r}")
    if heads < 1:
        raise ProgramError(f"heads: must be at least 1, got {heads}")
    s, d = seq, head_dim
    suffix = f"x{heads}h" if heads > 1 else ""
    pb = ProgramBuilder(f"attention-{s}x{d}{suffix}-{dtype}")
    pb.hbm("qT", heads * d, s, dtype)
    pb.hbm("kT", heads * d, s, dtype)
    pb.hbm("v", heads * s, d, dtype)
    pb.hbm("o", heads * s, d, dtype)
    key_chunks = -(-s // PARTITIONS)
    for name, partitions, free in (
        ("qT_sb", d, s),
        ("kT_sb", d, s),
        ("v_sb", PARTITIONS, key_chunks * d),
    ):
        for i in range(min(KV_SETS, heads)):
            pb.sbuf(f"{name}{i}", partitions, free, dtype)
    for prefix, partitions, free, dt in (
        ("scores", PARTITIONS, s, "fp32"),
        ("probs", PARTITIONS, s, dtype),
        ("pT", PARTITIONS, PARTITIONS, dtype),
        ("out", PARTITIONS, d, dtype),
        ("max", PARTITIONS, 1, "fp32"),
        ("sum", PARTITIONS, 1, "fp32"),
    ):
        for i in range(TRANSPOSES if prefix == "pT" else SLOTS):
            pb.sbuf(f"{prefix}{i}", partitions, free, dt)
    for i in range(2):
        pb.psum(f"ps_scores{i}", PARTITIONS, MOVING_FREE_MAX)
    for i in range(TRANSPOSES):
        pb.psum(f"ps_t{i}", PARTITIONS, PARTITIONS)
    for i in range(SLOTS):
        pb.psum(f"ps_o{i}", PARTITIONS, d)
    return pb


def attention_buffers(seq: int, head_dim: int, dtype: str = "bf16", heads: int = 1) -> Program:
    """The program's buffers without its instructions: what it keeps in SBUF,
    PSUM and HBM (a player times the instructions without building them)."""
    return _declared(seq, head_dim, dtype, heads).build()


def attention(seq: int, head_dim: int, dtype: str = "bf16", heads: int = 1) -> Program:
    pb = _declared(seq, head_dim, dtype, heads)
    s, d = seq, head_dim
    buf = pb.program.buffers
    q_t, k_t, v, o = buf["qT"], buf["kT"], buf["v"], buf["o"]
    key_chunks = -(-s // PARTITIONS)
    sets = min(KV_SETS, heads)
    q_sb = [buf[f"qT_sb{i}"] for i in range(sets)]
    k_sb = [buf[f"kT_sb{i}"] for i in range(sets)]
    v_sb = [buf[f"v_sb{i}"] for i in range(sets)]
    scores = [buf[f"scores{i}"] for i in range(SLOTS)]
    probs = [buf[f"probs{i}"] for i in range(SLOTS)]
    p_t = [buf[f"pT{i}"] for i in range(TRANSPOSES)]
    out = [buf[f"out{i}"] for i in range(SLOTS)]
    row_max = [buf[f"max{i}"] for i in range(SLOTS)]
    row_sum = [buf[f"sum{i}"] for i in range(SLOTS)]
    ps_s = [buf[f"ps_scores{i}"] for i in range(2)]
    ps_t = [buf[f"ps_t{i}"] for i in range(TRANSPOSES)]
    ps_o = [buf[f"ps_o{i}"] for i in range(SLOTS)]

    set_free: list[Token | None] = [None] * sets  # last matmul reading a Q/K/V set

    def load(h: int) -> Token | None:
        """Head h's Q, K, V into buffer set h % sets, once the head before
        that used the set has done its last matmul; returns the last load."""
        i = h % sets
        r0 = h * d
        t = pb.dma(q_sb[i].all(), q_t[r0 : r0 + d, 0:s], wait=(set_free[i],), signal="ld")
        t = pb.dma(k_sb[i].all(), k_t[r0 : r0 + d, 0:s], wait=(set_free[i],), signal="ld")
        for j in range(key_chunks):
            nk = min(PARTITIONS, s - j * PARTITIONS)
            k0 = h * s + j * PARTITIONS
            t = pb.dma(
                v_sb[i][0:nk, j * d : (j + 1) * d],
                v[k0 : k0 + nk, 0:d],
                wait=(set_free[i],),
                signal="ld",
            )
        return t

    scale = 1.0 / math.sqrt(d)
    ps_s_free: list[Token | None] = [None, None]
    ps_t_free: list[Token | None] = [None] * TRANSPOSES
    p_t_free: list[Token | None] = [None] * TRANSPOSES
    slot_free: list[Token | None] = [None] * SLOTS  # store of the tile that last used a slot
    chunk = 0
    pair = 0
    tile = 0

    def transpose_block(
        j: int, nq: int, pr: Buffer, probs_ready: Token | None
    ) -> tuple[Token | None, int, int]:
        """P[:, block j]^T into SBUF: transpose on the PE array, then copy
        out of PSUM on the vector or gpsimd engine (alternating by block)."""
        nonlocal pair
        nk = min(PARTITIONS, s - j * PARTITIONS)
        bank = pair % TRANSPOSES
        pair += 1
        tr = pb.transpose(
            ps_t[bank][0:nk, 0:nq],
            pr[0:nq, j * PARTITIONS : j * PARTITIONS + nk],
            wait=(probs_ready, ps_t_free[bank]),
            signal="mm",
        )
        # by block, not by bank: every query tile (and head) splits its copies
        # the same way, so no drift builds up between the two engines
        queue, sem = (Queue.VECTOR, "v") if j % 2 == 0 else (Queue.GPSIMD, "g")
        cp = pb.copy(
            p_t[bank][0:nk, 0:nq],
            ps_t[bank][0:nk, 0:nq],
            queue=queue,
            wait=(tr, p_t_free[bank]),
            signal=sem,
        )
        ps_t_free[bank] = cp
        return cp, bank, nk

    loaded = load(0)
    for h in range(heads):
        # The Sync queue is in order: the next head's loads go in before this
        # head's stores, so they run while this head computes.
        next_loaded = load(h + 1) if h + 1 < heads else None
        qs, ks, vs = q_sb[h % sets], k_sb[h % sets], v_sb[h % sets]
        mm: Token | None = None
        for q0 in range(0, s, PARTITIONS):
            nq = min(PARTITIONS, s - q0)
            slot = tile % SLOTS
            tile += 1
            sc, pr, mx, sm = scores[slot], probs[slot], row_max[slot], row_sum[slot]
            t: Token | None = None
            for c0 in range(0, s, MOVING_FREE_MAX):
                nk = min(MOVING_FREE_MAX, s - c0)
                bank = chunk % 2
                chunk += 1
                pb.load_stationary(qs[0:d, q0 : q0 + nq], wait=(loaded,))
                mm = pb.multiply_moving(
                    ps_s[bank][0:nq, 0:nk],
                    ks[0:d, c0 : c0 + nk],
                    dtype=dtype,
                    wait=(ps_s_free[bank],),
                    signal="mm",
                )
                t = pb.activation(
                    sc[0:nq, c0 : c0 + nk],
                    ps_s[bank][0:nq, 0:nk],
                    "identity",
                    scale=scale,
                    wait=(mm, slot_free[slot]),
                    signal="s",
                )
                ps_s_free[bank] = t
            sv, pv = sc[0:nq, 0:s], pr[0:nq, 0:s]
            t = pb.reduce(mx[0:nq, 0:1], sv, "max", wait=(t,), signal="v")
            t = pb.tensor_scalar(
                mx[0:nq, 0:1], mx[0:nq, 0:1], -1.0, "multiply", wait=(t,), signal="v"
            )
            # exp and its row sums in one pass of the scalar engine
            probs_ready = pb.activation(
                pv, sv, "exp", bias=mx[0:nq, 0:1], row_sum=sm[0:nq, 0:1], wait=(t,), signal="s"
            )

            # Transposes run ahead of the P V matmuls that consume them, so the
            # in-order tensor queue never waits on a copy it could have overlapped.
            ahead = deque(
                transpose_block(j, nq, pr, probs_ready) for j in range(min(TRANSPOSES, key_chunks))
            )
            for j in range(key_chunks):
                cp, bank, nk = ahead.popleft()
                pb.load_stationary(p_t[bank][0:nk, 0:nq], wait=(cp,))
                mm = pb.multiply_moving(
                    ps_o[slot][0:nq, 0:d],
                    vs[0:nk, j * d : (j + 1) * d],
                    dtype=dtype,
                    accumulate=j > 0,
                    wait=(slot_free[slot],),
                    signal="mm",
                )
                p_t_free[bank] = mm
                if j + TRANSPOSES < key_chunks:
                    ahead.append(transpose_block(j + TRANSPOSES, nq, pr, probs_ready))
            rcp = pb.activation(
                sm[0:nq, 0:1], sm[0:nq, 0:1], "reciprocal", wait=(probs_ready,), signal="s"
            )
            t = pb.tensor_scalar(
                out[slot][0:nq, 0:d],
                ps_o[slot][0:nq, 0:d],
                sm[0:nq, 0:1],
                "multiply",
                wait=(mm, rcp),
                signal="v",
            )
            o0 = h * s + q0
            slot_free[slot] = pb.dma(
                o[o0 : o0 + nq, 0:d], out[slot][0:nq, 0:d], wait=(t,), signal="st"
            )
        set_free[h % sets] = mm
        loaded = next_loaded
    return pb.build()
