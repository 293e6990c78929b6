"""The node daemon's live edges under hypothesis, against the real process:
the workload API over its socket, foreign files in the CDI directory and a
damaged checkpoint at start. The kept claim stays prepared throughout
(benchmarks/chaos.py runs the same with 10,000 cases per edge)."""

from collections.abc import Iterator
from functools import partial

import pytest

from localsim.controlplane.plane import ControlPlane
from testbed.chaos import daemon_edges as edges
from testbed.chaos.fuzzing import run_property
from testbed.chaos.parser_edges import checkpoint_files

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def prepared(control_plane: ControlPlane) -> Iterator[edges.Prepared]:
    with edges.prepared_daemon(control_plane) as daemon:
        yield daemon


def test_workload_api_requests(prepared: edges.Prepared) -> None:
    with edges.workload_client(prepared) as http:
        check = partial(edges.check_workload_request, prepared, http)
        run = run_property("workload API", edges.requests, check, 300)
    assert run.crashes == run.hangs == 0 and run.accepted and run.refused, run
    assert prepared.kept_intact()


def test_foreign_files_in_the_cdi_directory(prepared: edges.Prepared) -> None:
    check = partial(edges.check_cdi_foreign, prepared)
    run = run_property("CDI directory", edges.foreign_batches(3), check, 20)
    assert run.crashes == 0 and run.accepted and run.cases == 3 * run.rounds, run
    assert prepared.kept_intact()


def test_damaged_checkpoint_at_start(control_plane: ControlPlane) -> None:
    check = partial(edges.check_checkpoint_start, control_plane)
    run = run_property("checkpoint at start", checkpoint_files, check, 3)
    assert run.crashes == 0, run


def test_a_body_that_is_not_text_is_refused_not_a_server_error(prepared: edges.Prepared) -> None:
    """Found by the fuzzing: FastAPI's own handler answered 500 here."""
    with edges.workload_client(prepared) as http:
        response = http.post(
            f"/v1/claims/{prepared.kept_uid}/jobs",
            headers={"Authorization": f"Bearer {prepared.token}"},
            content=b"\xf5\x15\xe2\xcaG",
        )
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body"]
