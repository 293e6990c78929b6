"""The kubelet's plugin APIs as Python message classes.

The message modules are generated from `protos/` (see `generate.py`); they are
loaded here, generating them first when missing, and exposed untyped because
the generated code is not part of the checked sources.
"""

import importlib
from types import ModuleType
from typing import Any

from driver.kubeletplugin.protocol.generate import generate, is_current, module_name


def _load(proto_file: str) -> ModuleType:
    if not is_current():
        generate()
    return importlib.import_module(f"driver.kubeletplugin.protocol.gen.{module_name(proto_file)}")


registration: Any = _load("pluginregistration_v1.proto")
dra_v1: Any = _load("dra_v1.proto")
dra_v1beta1: Any = _load("dra_v1beta1.proto")
health: Any = _load("dra_health_v1alpha1.proto")

REGISTRATION_SERVICE = "pluginregistration.Registration"
DRA_V1_SERVICE = "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
DRA_V1BETA1_SERVICE = "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"
HEALTH_SERVICE = "v1alpha1.DRAResourceHealth"

PLUGIN_TYPE = "DRAPlugin"
"""`PluginInfo.type` of a DRA driver."""

SUPPORTED_VERSIONS = ("v1.DRAPlugin", "v1beta1.DRAPlugin", HEALTH_SERVICE)
"""`PluginInfo.supported_versions`: the services this plugin serves. From
Kubernetes 1.37 the kubelet opens the health stream only for a plugin that
lists a health service here; 1.36 reads the DRA entries and ignores the rest."""
