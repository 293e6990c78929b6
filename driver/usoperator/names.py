"""The operator's API names, labels and defaults, as AWS's operator uses them
where AWS says (group, kinds, fields) and this project's own where it does not."""

from typing import Final

from driver.devicemodel.awsprofile import AWS_DRIVER
from driver.kubeapi.resources import Resource

GROUP: Final = AWS_DRIVER
VERSION: Final = "v1"
WORKLOADS: Final = Resource(GROUP, VERSION, "neuronultraserverworkloads")
ULTRASERVERS: Final = Resource(GROUP, VERSION, "neuronultraservers")
TEMPLATES: Final = Resource("resource.k8s.io", "v1", "resourceclaimtemplates")

FINALIZER: Final = f"{AWS_DRIVER}/ultraserver-operator"
"""Holds a deleted workload until its nodes are released and its template and
pods are gone."""
MANAGED_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "trainium-dra-ultraserver-operator"
"""The value of MANAGED_LABEL on what the operator writes; it lists its templates by it."""

STRATEGIES: Final = ("NoOp", "RestartAll", "MigrateAffected", "ReplaceAffected")
"""`ReplaceAffected` is the name one version of AWS's page gives `MigrateAffected`;
both mean the same here."""
TOPOLOGY_SIZES: Final = (1, 2, 4)
