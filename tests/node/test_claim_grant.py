"""From a claim's allocation and the published slices to this node's cores (pure)."""

import pytest

from driver.devicemodel.devicecores import AllocationError
from driver.devicemodel.placement import NodePlace
from driver.node.claimconfig import ConfigError
from driver.node.devices import (
    claim_grant,
    device_attributes,
    logical_to_physical,
    physical_cores,
)
from simdevice.topology import CoreRange
from tests.node.slicedata import (
    DRIVER,
    RACK,
    allocated_claim,
    neuron_config,
    rack_slice,
)

ATTRS = device_attributes([rack_slice("rack-a", range(3))], DRIVER)
NODE1 = NodePlace("node-1", "rack-a", 1, RACK)


def test_core_partition_maps_to_host_global_logical_ids() -> None:
    claim = allocated_claim("rack-a", ["s1-c2-cores4-4"], [neuron_config(2)])
    grant = claim_grant(claim, ATTRS, NODE1, DRIVER, 1)
    assert grant.devices[0].ranges == (CoreRange(2, 4, 4),)
    # chip 2 owns logical ids 8..11 under LNC=2; cores 4..7 are its ids 10 and 11
    assert grant.visible_cores == (10, 11)
    assert grant.lnc == 2


def test_rack_default_lnc_applies_without_config() -> None:
    claim = allocated_claim("rack-a", ["s1-chip0"])
    grant = claim_grant(claim, ATTRS, NODE1, DRIVER, 4)
    assert (grant.lnc, grant.visible_cores) == (4, (0, 1))
    odd = claim_grant(allocated_claim("rack-a", ["s1-c0-cores3-1"]), ATTRS, NODE1, DRIVER, 1)
    assert (odd.lnc, odd.visible_cores) == (1, (3,))


def test_rack_default_that_does_not_fit_names_the_ultraserver_field() -> None:
    claim = allocated_claim("rack-a", ["s1-c0-cores3-1"])
    with pytest.raises(ConfigError, match=r"^UltraServer rack-a spec.defaultLogicalNeuronCore: "):
        claim_grant(claim, ATTRS, NODE1, DRIVER, 2)


def test_ultraserver_device_prepares_only_local_chips() -> None:
    grant = claim_grant(allocated_claim("rack-a", ["rack"]), ATTRS, NODE1, DRIVER, 1)
    assert grant.ultraserver
    assert physical_cores(grant.devices[0].ranges) == {
        (chip, core) for chip in range(4) for core in range(8)
    }
    assert grant.visible_cores == tuple(range(32))  # 4 chips x 8 logical cores at LNC=1


def test_device_of_another_node_is_refused() -> None:
    claim = allocated_claim("rack-a", ["s2-chip0"])
    with pytest.raises(AllocationError, match=r"results\[0\].*server 2.*another node"):
        claim_grant(claim, ATTRS, NODE1, DRIVER, 1)


def test_device_of_another_rack_is_refused() -> None:
    attrs = device_attributes([rack_slice("rack-b", range(2))], DRIVER)
    claim = allocated_claim("rack-b", ["s1-chip0"])
    with pytest.raises(AllocationError, match="UltraServer 'rack-b'"):
        claim_grant(claim, attrs, NODE1, DRIVER, 1)


def test_unknown_device_and_unallocated_claim() -> None:
    with pytest.raises(AllocationError, match="not in any ResourceSlice"):
        claim_grant(allocated_claim("rack-a", ["nope"]), ATTRS, NODE1, DRIVER, 1)
    with pytest.raises(AllocationError, match=r"^status.allocation: "):
        claim_grant({"metadata": {}, "status": {}}, ATTRS, NODE1, DRIVER, 1)


def test_lnc_that_does_not_fit_the_partition_names_the_config() -> None:
    claim = allocated_claim("rack-a", ["s1-c0-cores2-2"], [neuron_config(4)])
    with pytest.raises(ConfigError, match=r"^status.allocation.devices.config: .*=4"):
        claim_grant(claim, ATTRS, NODE1, DRIVER, 1)


def test_ultraserver_config_on_a_chip_is_refused() -> None:
    config = neuron_config(2)
    config["opaque"]["parameters"]["kind"] = "UltraServerConfig"
    claim = allocated_claim("rack-a", ["s1-chip0"], [config])
    with pytest.raises(ConfigError, match="use NeuronConfig"):
        claim_grant(claim, ATTRS, NODE1, DRIVER, 1)


def test_32_devices_in_one_claim() -> None:
    names = [f"s1-c{chip}-cores{core}-1" for chip in range(4) for core in range(8)]
    claim = allocated_claim("rack-a", names, [neuron_config(1)])
    grant = claim_grant(claim, ATTRS, NODE1, DRIVER, 1)
    assert len(grant.devices) == 32
    assert grant.visible_cores == tuple(range(32))


def test_qualified_attribute_names_are_read_too() -> None:
    qualified = rack_slice("rack-a", range(2))
    for dev in qualified["spec"]["devices"]:
        dev["attributes"] = {f"{DRIVER}/{k}": v for k, v in dev["attributes"].items()}
    attrs = device_attributes([qualified], DRIVER)
    grant = claim_grant(allocated_claim("rack-a", ["s1-chip3"]), attrs, NODE1, DRIVER, 1)
    assert grant.devices[0].ranges == (CoreRange(3, 0, 8),)


def test_logical_to_physical_inverts_visible_cores() -> None:
    for lnc in (1, 2, 4):
        for chip in range(4):
            for start in range(0, 8, lnc):
                ids = CoreRange(chip, start, lnc).visible_cores(lnc, 8)
                assert logical_to_physical(ids[0], lnc, 8) == [
                    (chip, start + i) for i in range(lnc)
                ]


def test_admin_access_devices_observe_cores_without_holding_them() -> None:
    claim = allocated_claim("rack-a", ["s1-chip0"])
    claim["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    grant = claim_grant(claim, ATTRS, NODE1, DRIVER, 1)
    assert grant.devices[0].admin_access
    assert grant.visible_cores == tuple(range(8))
