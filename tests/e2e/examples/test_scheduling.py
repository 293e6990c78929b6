"""The scheduling examples on the stand-in rack (testbed/examples/scheduling.py)."""

import pytest

from testbed.examples.scheduling import (
    test_a_server_binds_after_its_fabric_and_not_while_it_fails,
    test_extended_resource_requests_are_served_by_dra,
    test_four_server_gang_on_one_rack,
    test_quota_refuses_the_fifth_core,
    test_the_binpack_profile_puts_core_requests_on_the_fullest_node,
    test_whole_rack_gang_binds_all_or_nothing,
)

pytestmark = pytest.mark.integration

__all__ = [
    "test_a_server_binds_after_its_fabric_and_not_while_it_fails",
    "test_extended_resource_requests_are_served_by_dra",
    "test_four_server_gang_on_one_rack",
    "test_quota_refuses_the_fifth_core",
    "test_the_binpack_profile_puts_core_requests_on_the_fullest_node",
    "test_whole_rack_gang_binds_all_or_nothing",
]
"""The checks collected here, against the stand-in `target` of conftest.py."""
