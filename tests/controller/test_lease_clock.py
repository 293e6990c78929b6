"""Lease expiry against the real apiserver when the holder's wall clock is
skewed: a standby judges the holder gone only after seeing the Lease unchanged
for its duration by its own clock, whatever renewTime the holder writes."""

import datetime
import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from driver.controller.lease import LeaseElector
from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.objects import Objects
from localsim.controlplane.plane import ControlPlane

pytestmark = pytest.mark.integration

DURATION = 3
NAMESPACE = "default"


@pytest.fixture
def api(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    with control_plane.api_client() as api:
        yield api


@pytest.mark.parametrize("skew_hours", [-24, 24], ids=["holder-behind", "holder-ahead"])
def test_a_standby_takes_over_after_the_holder_stops_by_its_own_clock(
    api: client.ApiClient, skew_hours: int
) -> None:
    objects = Objects(ApiServer(api.configuration, "trainium-dra-test", 30.0))
    name = f"lease-skew-{'behind' if skew_hours < 0 else 'ahead'}"
    offset = datetime.timedelta(hours=skew_hours)
    holder = LeaseElector(
        objects,
        namespace=NAMESPACE,
        name=name,
        identity="holder",
        duration_seconds=DURATION,
        clock=lambda: datetime.datetime.now(datetime.UTC) + offset,
    )
    standby = LeaseElector(
        objects, namespace=NAMESPACE, name=name, identity="standby", duration_seconds=DURATION
    )
    try:
        assert holder.try_acquire()
        renewing_until = time.monotonic() + 2.5 * DURATION
        while True:
            assert holder.try_acquire()
            last_renewal = time.monotonic()
            assert not standby.try_acquire()
            if last_renewal > renewing_until:
                break
            time.sleep(DURATION / 5)
        while not standby.try_acquire():
            assert time.monotonic() - last_renewal < 4 * DURATION, "the standby never took over"
            time.sleep(0.1)
        assert time.monotonic() - last_renewal >= DURATION
        assert not holder.try_acquire()
    finally:
        client.CoordinationV1Api(api).delete_namespaced_lease(name, NAMESPACE)
