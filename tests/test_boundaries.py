"""The package boundaries the device model exists for, checked on the source.

The controller and the node daemon share only `driver.devicemodel`, the
apiserver client `driver.kubeapi` (and the API names in `driver.names`);
neither shared package imports either side, the node daemon reaches the
apiserver through `driver.kubeapi` only, and `simdevice` knows nothing of
Kubernetes.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(package: str) -> dict[str, set[str]]:
    """Module file -> every module it imports, for all files under `package`."""
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        if "gen" in path.relative_to(ROOT).parts:
            continue
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        out[str(path.relative_to(ROOT))] = names
    return out


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("driver/devicemodel", ("driver.controller", "driver.plugin", "driver.localsim")),
        ("driver/kubeapi", ("driver.controller", "driver.plugin", "driver.localsim")),
        ("driver/controller", ("driver.plugin", "driver.localsim")),
        # every request of the node daemon goes through driver.kubeapi's one pool
        ("driver/plugin", ("driver.controller", "driver.localsim", "kubernetes")),
        ("simdevice", ("driver", "kubernetes", "kopf")),
    ],
)
def test_package_imports_stay_inside_its_boundary(package: str, forbidden: tuple[str, ...]) -> None:
    crossing = {
        f"{path}: {module}"
        for path, modules in imported_modules(package).items()
        for module in modules
        if any(module == f or module.startswith(f"{f}.") for f in forbidden)
    }
    assert not crossing, f"{package} must not import {forbidden}"
