"""`nccom-test`: AWS's collectives benchmark, answered by the model.

The operation names, the common flags and the output table are those of the
Neuron SDK's nccom-test; the times come from `simdevice.collectives` on the
ranks' chips. With `--chips` the command times them here (no cluster
needed); inside a workload container the node daemon times them on the
claim's own chips (`driver/nccomtest.py` asks it). Parsing, the offline
answer and the table are pure functions here.
"""

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from simdevice.collectives import ALGORITHMS, CollectiveTiming, time_collective
from simdevice.fabric import RankPlace, rank_places
from simdevice.topology import GENERATIONS, rack_spec

OPERATION_NAMES: Mapping[str, str] = {
    "all_reduce": "all-reduce",
    "allr": "all-reduce",
    "all_gather": "all-gather",
    "allg": "all-gather",
    "reduce_scatter": "reduce-scatter",
    "redsct": "reduce-scatter",
    "alltoall": "all-to-all",
    "sendrecv": "send-receive",
    "permute": "permute",
}
NOT_MODELLED = ("all_gatherv", "allgv", "alltoallv")
DTYPE_BYTES: Mapping[str, int] = {
    "uint8": 1,
    "int8": 1,
    "fp8": 1,
    "fp8e4": 1,
    "uint16": 2,
    "int16": 2,
    "fp16": 2,
    "bf16": 2,
    "uint32": 4,
    "int32": 4,
    "fp32": 4,
}
CLAIM_ENV = "TRAINIUM_DRA_CLAIM_UID"
GENERATION_ENV = "TRAINIUM_DRA_GENERATION"
DEFAULT_GENERATION = "trn3-gen2"
GIB = float(1 << 30)
_SIZE = re.compile(r"^(\d+)\s*([kmg]?)(?:i?b)?$", re.IGNORECASE)


class UsageError(ValueError):
    """Bad arguments; the message names the flag."""


def parse_size(flag: str, text: str) -> int:
    """`32M`, `1kb`, `1MB`, `1073741824`: units are powers of 1024, as nccom-test's."""
    match = _SIZE.match(text.strip())
    if not match:
        raise UsageError(f"{flag}: {text!r} is not a size; write bytes or e.g. 1kb, 32M, 1GB")
    number, unit = match.groups()
    return int(number) << {"": 0, "k": 10, "m": 20, "g": 30}[unit.lower()]


def parse_chips(flag: str, text: str) -> list[tuple[int, int]]:
    """`0,1,4-7` (one rack) or `0:0,1:0` (RACK:INDEX): (rack, chip) in order."""
    out: list[tuple[int, int]] = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        rack_text, _, chips = item.rpartition(":")
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", chips)
        if not match or (rack_text and not rack_text.isdigit()):
            raise UsageError(
                f"{flag}: {item!r} is not a chip; write rack chip indexes (0,1,4-7) "
                "or RACK:INDEX (0:3,1:3)"
            )
        first, last = int(match[1]), int(match[2] or match[1])
        if last < first:
            raise UsageError(f"{flag}: range {item!r} runs backwards; write {last}-{first}")
        out += [(int(rack_text or 0), c) for c in range(first, last + 1)]
    if not out:
        raise UsageError(f"{flag}: no chips given")
    return out


def sizes(
    minbytes: int, maxbytes: int, stepbytes: int | None, stepfactor: float | None
) -> list[int]:
    """minbytes, then + stepbytes or x stepfactor, up to maxbytes (nccom-test's sweep)."""
    if stepbytes is not None and stepfactor is not None:
        raise UsageError("-i/--stepbytes: give it or -f/--stepfactor, not both")
    if maxbytes < minbytes:
        raise UsageError(f"-e/--maxbytes: {maxbytes} is below -b/--minbytes {minbytes}")
    if stepfactor is not None and stepfactor <= 1:
        raise UsageError(f"-f/--stepfactor: must be > 1, got {stepfactor:g}")
    step = stepbytes if stepbytes is not None else max(1, (maxbytes - minbytes) // 10)
    if step < 1:
        raise UsageError(f"-i/--stepbytes: must be >= 1, got {step}")
    out, size = [], minbytes
    while size <= maxbytes:
        out.append(size)
        size = int(size * stepfactor) if stepfactor is not None else size + step
        if stepfactor is not None and size == out[-1]:
            size += 1
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nccom-test",
        description="Time collectives on the ranks' chips with the simulator's fabric model "
        "(one rank per chip; operation names and flags as AWS's nccom-test). Inside a "
        "workload container the node daemon times them on the claim's chips; --chips "
        "times them here, without a cluster.",
    )
    p.add_argument("operation", help=f"one of {', '.join(OPERATION_NAMES)}")
    p.add_argument("-r", "--nworkers", type=int, required=True, help="ranks (one per chip)")
    p.add_argument("-b", "--minbytes", default="32M", help="first size (default 32M)")
    p.add_argument("-e", "--maxbytes", default="32M", help="last size (default 32M)")
    p.add_argument("-i", "--stepbytes", help="bytes added per size (default (max-min)/10)")
    p.add_argument("-f", "--stepfactor", type=float, help="factor per size")
    p.add_argument("-d", "--datatype", default="uint8", help=", ".join(DTYPE_BYTES))
    p.add_argument("-n", "--iters", type=int, default=20, help="measured operations")
    p.add_argument("-w", "--warmup_iters", type=int, default=5, help="warm-up operations")
    p.add_argument("--show-algorithm", action="store_true", help="add the algorithm column")
    p.add_argument(
        "--chips",
        help="time here, without a cluster, on these rack chip indexes (rank i on the i-th), "
        "e.g. 0-7 or RACK:INDEX for several racks, 0:0,1:0",
    )
    p.add_argument(
        "--peers",
        help="inside a workload container: the chips of the ranks outside the claim (a gang's "
        "other pods), after the claim's own; rack chip indexes of the claim's rack, or "
        "RACK:INDEX with RACK >= 1 for another rack",
    )
    p.add_argument(
        "--generation",
        choices=GENERATIONS,
        help=f"with --chips: the racks' generation (default ${GENERATION_ENV}, else "
        f"{DEFAULT_GENERATION})",
    )
    p.add_argument("--algorithm", choices=ALGORITHMS, help="force one (default: the fastest)")
    return p


@dataclass(frozen=True)
class Run:
    """What to time: validated arguments. `places` is set when timed here
    (--chips); else the node daemon places the claim's ranks and `peers`."""

    operation: str
    nworkers: int
    sizes: list[int]
    datatype: str
    algorithm: str | None
    show_algorithm: bool
    iterations: int  # warm-up and measured operations, each size
    generation: str = DEFAULT_GENERATION
    places: list[RankPlace] | None = None
    peers: list[tuple[int, int]] | None = None


@dataclass(frozen=True)
class Row:
    """One size's line of the table."""

    size: int
    duration: float  # seconds
    algbw: float  # bytes/s
    busbw: float  # bytes/s
    algorithm: str

    @classmethod
    def of(cls, t: CollectiveTiming) -> "Row":
        return cls(int(t.size), t.duration, t.algbw, t.busbw, t.algorithm)


def _common(args: argparse.Namespace) -> None:
    if args.operation in NOT_MODELLED:
        raise UsageError(
            f"operation: {args.operation} needs per-rank counts the model does not take; "
            "use its uniform form (all_gather, alltoall)"
        )
    if args.operation not in OPERATION_NAMES:
        raise UsageError(
            f"operation: {args.operation!r} is not one of {', '.join(OPERATION_NAMES)}"
        )
    if args.datatype not in DTYPE_BYTES:
        raise UsageError(f"-d/--datatype: {args.datatype!r} is not one of {', '.join(DTYPE_BYTES)}")
    if args.nworkers < 1:
        raise UsageError(f"-r/--nworkers: must be >= 1, got {args.nworkers}")
    for flag, value, low in (
        ("-n/--iters", args.iters, 1),
        ("-w/--warmup_iters", args.warmup_iters, 0),
    ):
        if value < low:
            raise UsageError(f"{flag}: must be >= {low}, got {value}")


def _offline_places(args: argparse.Namespace, generation: str) -> list[RankPlace]:
    if args.peers is not None:
        raise UsageError(
            "--peers: only inside a workload container, where the claim's chips come from "
            "the node; with --chips name every rank's chip there"
        )
    chips = parse_chips("--chips", args.chips)
    if args.nworkers > len(chips):
        raise UsageError(
            f"-r/--nworkers: {args.nworkers} ranks need {args.nworkers} chips, one per rank; "
            f"only {len(chips)} given"
        )
    try:
        return rank_places(rack_spec(generation), chips[: args.nworkers])
    except ValueError as err:
        raise UsageError(f"--chips: {err}") from err


def parse(argv: Sequence[str], env: Mapping[str, str]) -> Run:
    args = _parser().parse_args(list(argv))
    _common(args)
    stepbytes = parse_size("-i/--stepbytes", args.stepbytes) if args.stepbytes else None
    swept = sizes(
        parse_size("-b/--minbytes", args.minbytes),
        parse_size("-e/--maxbytes", args.maxbytes),
        stepbytes,
        args.stepfactor,
    )
    run = Run(
        OPERATION_NAMES[args.operation],
        args.nworkers,
        swept,
        args.datatype,
        args.algorithm,
        args.show_algorithm,
        args.iters + args.warmup_iters,
    )
    if args.chips is not None:
        generation = args.generation or env.get(GENERATION_ENV) or DEFAULT_GENERATION
        if generation not in GENERATIONS:
            raise UsageError(
                f"--generation: ${GENERATION_ENV} is {generation!r}, not one of "
                f"{', '.join(GENERATIONS)}"
            )
        return replace(run, generation=generation, places=_offline_places(args, generation))
    if not env.get(CLAIM_ENV):
        raise UsageError(
            f"--chips: no chips; give --chips (e.g. 0-{args.nworkers - 1}) or run inside a "
            f"workload container, whose node times the claim's own chips"
        )
    if args.generation is not None:
        raise UsageError(
            "--generation: only with --chips; inside a workload container the node's rack decides"
        )
    peers = parse_chips("--peers", args.peers) if args.peers else []
    return replace(run, peers=peers)


def offline_rows(run: Run) -> list[Row]:
    """The model's answer here, for --chips."""
    if run.places is None:
        raise UsageError("--chips: no chips to time here")
    spec = rack_spec(run.generation)
    return [
        Row.of(time_collective(run.operation, spec, run.places, s, run.algorithm))
        for s in run.sizes
    ]


def table(run: Run, rows: Sequence[Row]) -> str:
    """nccom-test's output: one row per size, then the average bus bandwidth."""
    columns = ["size(B)", "count(elems)", "type", "time:avg(us)", "algbw(GB/s)", "busbw(GB/s)"]
    if run.show_algorithm:
        columns.append("algorithm")
    cells = [columns]
    for r in rows:
        line = [
            str(r.size),
            str(r.size // DTYPE_BYTES[run.datatype]),
            run.datatype,
            f"{r.duration * 1e6:.2f}",
            f"{r.algbw / GIB:.2f}",
            f"{r.busbw / GIB:.2f}",
        ]
        if run.show_algorithm:
            line.append(r.algorithm)
        cells.append(line)
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["    ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)) for r in cells]
    average = sum(r.busbw for r in rows) / len(rows) / GIB
    lines.append(f"Avg bus bandwidth:\t{average:.4f}GB/s")
    return "\n".join(lines)
