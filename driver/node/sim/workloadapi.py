"""The workload API of one node: simulated jobs for one prepared claim.

A container finds the socket and its claim's token through the CDI mounts and
sends `Authorization: Bearer <token>`. Cores are the host-global logical ids
of NEURON_RT_VISIBLE_CORES; any core outside the claim is refused. Collectives
are timed on the claim's own chips as the checkpoint records them; a caller
names only the chips of ranks outside the claim (its gang's other pods).
"""

import hmac
from collections.abc import Mapping
from dataclasses import asdict, is_dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from driver.devicemodel.placement import NodePlace
from driver.node.devices import logical_to_physical
from driver.node.durable.checkpoint import PREPARE_COMPLETED, ClaimRecord
from driver.node.durable.claimfiles import claim_fabric, grant_of, hash_token
from driver.node.durable.groupcommit import NodeState
from driver.node.metrics import DriverMetrics
from driver.node.sim.simhost import SimHost
from simdevice.collectives import ALGORITHMS, OPERATIONS, time_collective
from simdevice.fabric import RankPlace, rank_places

MAX_SIZES = 1024
"""Sizes one collectives request may time: a sweep of nccom-test's by 10 steps
or by factors of 2 from 1 B to 1 TiB stays far below it."""
MAX_ITERATIONS = 1 << 30


class JobRequest(BaseModel):
    workload: dict[str, Any] = Field(
        description="Workload spec, e.g. {'kind': 'gemm', 'm': 4096, 'n': 4096, 'k': 4096}",
    )
    cores: list[int] | None = Field(
        default=None,
        description="Logical core ids from NEURON_RT_VISIBLE_CORES; default: all of the claim",
    )


class CollectivesRequest(BaseModel):
    operation: str = Field(description=f"one of {', '.join(OPERATIONS)}")
    nworkers: int = Field(description="ranks, one per chip: the claim's chips first, then peers")
    sizes: list[int] = Field(description="bytes per operation (nccom-test's size(B)), each timed")
    algorithm: str | None = Field(default=None, description="ring, rdh or mesh; default fastest")
    peers: list[tuple[int, int]] = Field(
        default=[],
        description="[rack, chip index] of ranks outside the claim; rack 0 is the claim's rack",
    )
    iterations: int = Field(default=1, description="operations per size, counted in the metrics")


class ClaimView(BaseModel):
    uid: str
    namespace: str
    name: str
    logical_neuron_core: int
    visible_cores: list[int]
    devices: list[str]


def job_view(job: Any) -> dict[str, Any]:
    """A JobInfo as JSON (dataclass fields; tuples become lists)."""
    if is_dataclass(job) and not isinstance(job, type):
        return asdict(job)
    return dict(vars(job))


def refuse(detail: str) -> HTTPException:
    """A request whose values the model cannot take: 400, the message naming the field."""
    return HTTPException(400, detail)


def collective_places(
    place: NodePlace, record: ClaimRecord, body: CollectivesRequest
) -> list[RankPlace]:
    """The ranks' chips: the claim's own (as the node prepared them, in ring
    order), then the peers the caller names, the first `nworkers` of them."""
    if body.operation not in OPERATIONS:
        raise refuse(f"operation: {body.operation!r} is not one of {', '.join(OPERATIONS)}")
    if body.algorithm is not None and body.algorithm not in ALGORITHMS:
        raise refuse(f"algorithm: {body.algorithm!r} is not one of {', '.join(ALGORITHMS)}")
    if not 1 <= len(body.sizes) <= MAX_SIZES:
        raise refuse(f"sizes: give 1 to {MAX_SIZES} sizes, got {len(body.sizes)}")
    if any(size < 0 for size in body.sizes):
        raise refuse(f"sizes: every size must be >= 0 bytes, got {min(body.sizes)}")
    if not 1 <= body.iterations <= MAX_ITERATIONS:
        raise refuse(f"iterations: must be in [1, {MAX_ITERATIONS}], got {body.iterations}")
    own, _ = claim_fabric(grant_of(record), place)
    if not 1 <= body.nworkers <= len(own) + len(body.peers):
        raise refuse(
            f"nworkers: {body.nworkers} ranks need {body.nworkers} chips, one per rank; claim "
            f"{record.uid} has {len(own)} and peers name {len(body.peers)} (name the other "
            "ranks' chips in peers)"
        )
    mine = {(0, chip) for chip in own}
    taken = [f"{rack}:{chip}" for rack, chip in body.peers if (rack, chip) in mine]
    if taken:
        raise refuse(f"peers: {', '.join(taken)} are chips of claim {record.uid} itself")
    chips = [(0, chip) for chip in own] + list(body.peers)
    try:
        return rank_places(place.rack, chips[: body.nworkers])
    except ValueError as err:  # TopologyError: "chips: ..."
        raise refuse(f"peers: {err}") from err


def create_app(place: NodePlace, state: NodeState, sim: SimHost, metrics: DriverMetrics) -> FastAPI:
    node_name, cores_per_chip = place.node_name, place.rack.chip.cores
    app = FastAPI(
        title=f"trainium-dra workload API ({node_name})",
        version="v1",
        description="Submit, list, inspect and cancel simulated jobs on a claim's cores; "
        "time collectives on its chips.",
    )

    @app.exception_handler(RequestValidationError)
    async def refused(_: Request, err: RequestValidationError) -> JSONResponse:
        """Each bad field and why, without echoing the input: FastAPI's own
        handler fails with a 500 on a body that is not UTF-8."""
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in err.errors()]
        return JSONResponse(status_code=422, content={"detail": detail})

    def claim(uid: str, authorization: Annotated[str, Header()] = "") -> ClaimRecord:
        record = state.checkpoint.claims.get(uid)
        if record is None or record.state != PREPARE_COMPLETED:
            raise HTTPException(404, f"claim {uid} is not prepared on node {node_name}")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise HTTPException(
                401, "Authorization: send 'Bearer <token>' with the claim's token file"
            )
        if not hmac.compare_digest(hash_token(token), record.token_sha256):
            raise HTTPException(403, f"Authorization: token is not the one of claim {uid}")
        return record

    @app.get("/v1/claims/{uid}", response_model=ClaimView)
    def inspect_claim(record: Annotated[ClaimRecord, Depends(claim)]) -> ClaimView:
        return ClaimView(
            uid=record.uid,
            namespace=record.namespace,
            name=record.name,
            logical_neuron_core=record.lnc,
            visible_cores=record.visible_cores,
            devices=[f"{d.pool}/{d.device}" for d in record.devices],
        )

    @app.post("/v1/claims/{uid}/jobs", status_code=201)
    def submit_job(
        record: Annotated[ClaimRecord, Depends(claim)], body: JobRequest
    ) -> Mapping[str, Any]:
        cores = record.visible_cores if body.cores is None else body.cores
        if not cores:
            raise HTTPException(422, "cores: must name at least one core")
        outside = [c for c in cores if c not in record.visible_cores]
        if outside:
            raise HTTPException(
                403,
                f"cores: {outside} are not cores of claim {record.uid} "
                f"(NEURON_RT_VISIBLE_CORES={','.join(map(str, record.visible_cores))})",
            )
        physical = [
            pair
            for c in dict.fromkeys(cores)
            for pair in logical_to_physical(c, record.lnc, cores_per_chip)
        ]
        try:
            job = sim.submit(record.uid, body.workload, physical)
        except ValueError as err:  # WorkloadError names the workload field
            raise HTTPException(422, f"workload.{err}") from err
        return job_view(job)

    @app.get("/v1/claims/{uid}/jobs")
    def list_jobs(record: Annotated[ClaimRecord, Depends(claim)]) -> list[Mapping[str, Any]]:
        return [job_view(job) for job in sim.jobs(record.uid)]

    @app.get("/v1/claims/{uid}/jobs/{job_id}")
    def get_job(record: Annotated[ClaimRecord, Depends(claim)], job_id: str) -> Mapping[str, Any]:
        job = sim.job(record.uid, job_id)
        if job is None:
            raise HTTPException(404, f"job {job_id} is not a job of claim {record.uid}")
        return job_view(job)

    @app.delete("/v1/claims/{uid}/jobs/{job_id}")
    def cancel_job(
        record: Annotated[ClaimRecord, Depends(claim)], job_id: str
    ) -> Mapping[str, Any]:
        job = sim.cancel(record.uid, job_id)
        if job is None:
            raise HTTPException(404, f"job {job_id} is not a job of claim {record.uid}")
        return job_view(job)

    @app.post("/v1/claims/{uid}/collectives")
    def time_collectives(
        record: Annotated[ClaimRecord, Depends(claim)], body: CollectivesRequest
    ) -> Mapping[str, Any]:
        places = collective_places(place, record, body)
        try:
            timings = [
                time_collective(body.operation, place.rack, places, size, body.algorithm)
                for size in body.sizes
            ]
        except ValueError as err:  # CollectiveError names the field
            raise refuse(str(err)) from err
        metrics.observe_collectives(
            node_name,
            (record.uid, record.namespace, record.name),
            body.operation,
            count=body.iterations * len(timings),
            size_bytes=body.iterations * sum(t.size for t in timings),
            seconds=body.iterations * sum(t.duration for t in timings),
        )
        return {
            "generation": place.rack.generation,
            "ranks": [asdict(p) for p in places],
            "rows": [
                {
                    "size": int(t.size),
                    "duration": t.duration,
                    "algbw": t.algbw,
                    "busbw": t.busbw,
                    "algorithm": t.algorithm,
                    "bytes_per_chip": t.bytes_per_chip,
                }
                for t in timings
            ],
        }

    return app
