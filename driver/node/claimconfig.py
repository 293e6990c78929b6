"""Opaque claim configuration of this driver: `NeuronConfig` and `UltraServerConfig`,
in either profile's dialect (this project's `trainium.sim.dev/v1alpha1`, or
AWS's `neuron.aws.com/v1` with `ultraserverMode`).

Pure validation: a parameters object in, a `DeviceConfig` out, or a
`ConfigError` whose message starts with the path of the offending field and
says the fix. The node daemon validates every config of a claim before it
writes anything, so a bad config never leaves half-prepared state.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from driver.devicemodel.awsprofile import ULTRASERVER_MODES
from driver.devicemodel.profiles import (
    CONFIG_KINDS,
    TRAINIUM,
    ConfigDialect,
)
from simdevice.topology import VALID_LNC


class ConfigError(ValueError):
    """Invalid opaque configuration; the message starts with the field path."""


@dataclass(frozen=True)
class DeviceConfig:
    """What a config asks of the devices it applies to."""

    kind: str
    logical_neuron_core: int | None  # None: the default for the device
    ultraserver_mode: int | None = None  # nodes of the UltraServer the job spans (AWS)


def shown(value: Any) -> str:
    """A JSON value as an error message shows it: scalars as written, strings quoted,
    anything else by its type. The chart's admission policy shows values the same way."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        return "a float"
    if isinstance(value, list):
        return "a list"
    return "an object"


def parse_config(
    parameters: Any, where: str, dialect: ConfigDialect = TRAINIUM.dialect
) -> DeviceConfig:
    """Validate one opaque `parameters` object found at `where`.

    The chart's ValidatingAdmissionPolicy applies these same rules, with these
    same messages, when a claim or template is created
    (charts/trainium-dra/templates/admission-policy-config.yaml); a test keeps
    the two in step.
    """
    if not isinstance(parameters, Mapping):
        raise ConfigError(
            f"{where}: must be an object with apiVersion {shown(dialect.api_version)} and kind "
            f"one of {', '.join(CONFIG_KINDS)}, got {shown(parameters)}"
        )
    api_version = parameters.get("apiVersion")
    if api_version != dialect.api_version:
        raise ConfigError(
            f"{where}.apiVersion: must be {shown(dialect.api_version)}, got {shown(api_version)}"
        )
    kind = parameters.get("kind")
    if not isinstance(kind, str) or kind not in CONFIG_KINDS:
        raise ConfigError(
            f"{where}.kind: must be one of {', '.join(CONFIG_KINDS)}, got {shown(kind)}"
        )
    fields = dialect.fields[kind]
    unknown = sorted(str(key) for key in parameters if key not in fields)
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]}: unknown field of {kind}; allowed fields are {', '.join(fields)}"
        )
    lnc = parameters.get("logicalNeuronCore")
    if lnc is not None and not (type(lnc) is int and lnc in VALID_LNC):
        raise ConfigError(
            f"{where}.logicalNeuronCore: must be one of {', '.join(map(str, VALID_LNC))}, "
            f"got {shown(lnc)}"
        )
    ultraserver_mode = parameters.get("ultraserverMode")
    if ultraserver_mode is not None and not (
        type(ultraserver_mode) is int and ultraserver_mode in ULTRASERVER_MODES
    ):
        raise ConfigError(
            f"{where}.ultraserverMode: must be one of {', '.join(map(str, ULTRASERVER_MODES))}, "
            f"got {shown(ultraserver_mode)}"
        )
    return DeviceConfig(kind=kind, logical_neuron_core=lnc, ultraserver_mode=ultraserver_mode)


def request_matches(config_requests: Sequence[str], request: str) -> bool:
    """Whether a config listing `config_requests` applies to result `request`.

    An empty list applies to every request; `main` applies to its subrequests
    `main/sub` (prioritized lists).
    """
    if not config_requests:
        return True
    parent = request.split("/", 1)[0]
    return request in config_requests or parent in config_requests


def configs_by_request(
    allocation_devices: Mapping[str, Any],
    driver: str,
    requests: Sequence[str],
    dialect: ConfigDialect = TRAINIUM.dialect,
) -> dict[str, list[DeviceConfig]]:
    """Every config of this driver that applies to each request, in precedence order.

    Class configs come before claim configs and later entries override earlier
    ones, as the allocation lists them. Every config of this driver is
    validated, even one that matches no request, so errors never hide.
    """
    result: dict[str, list[DeviceConfig]] = {request: [] for request in requests}
    entries = allocation_devices.get("config") or []
    ordered = sorted(
        enumerate(entries), key=lambda item: 0 if item[1].get("source") == "FromClass" else 1
    )
    for index, entry in ordered:
        opaque = entry.get("opaque") or {}
        if opaque.get("driver") != driver:
            continue
        where = f"status.allocation.devices.config[{index}].opaque.parameters"
        parsed = parse_config(opaque.get("parameters"), where, dialect)
        for request in requests:
            if request_matches(entry.get("requests") or [], request):
                result[request].append(parsed)
    return result
