"""Every deploy/examples/kueue-* example on the kind cluster, with Kueue from
its own chart configured as `up --with-kueue` configures it (`make
kind-kueue`): the checks of testbed/examples/kueue.py, which the stand-in runs
too (tests/e2e/test_kueue.py), here against kind's real kubelets and one
Trn3 Gen1 rack of four nodes, the whole-rack examples fitted to it
(testbed/examples/rackscale.py). Run by hack/kind/e2e.sh on the chart's
default profile (the cluster: conftest.py); `make test-stand-in` leaves this
directory out."""

import pytest

from testbed.examples.kueue import (
    test_a_team_borrows_and_the_lender_reclaims,
    test_high_priority_rack_job_preempts_low_jobs,
    test_kueue_refuses_claims_it_cannot_count,
    test_rack_gang_is_admitted_whole_and_not_overtaken,
    test_team_quota_admits_jobs_up_to_its_cores,
)

pytestmark = pytest.mark.integration

__all__ = [
    "test_a_team_borrows_and_the_lender_reclaims",
    "test_high_priority_rack_job_preempts_low_jobs",
    "test_kueue_refuses_claims_it_cannot_count",
    "test_rack_gang_is_admitted_whole_and_not_overtaken",
    "test_team_quota_admits_jobs_up_to_its_cores",
]
