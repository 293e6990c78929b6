"""The kubelet-plugin machinery knows nothing of Trainium: `driver.kubeletplugin`
imports no other part of the driver but the kubelet's wire messages
(`driver.plugin.kubeletapi`, generated from the kubelet's protos)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "driver" / "kubeletplugin"
ALLOWED = ("driver.kubeletplugin", "driver.plugin.kubeletapi")


def imported_names(path: Path) -> set[str]:
    """Every module or module member a file imports, by its full dotted name."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_kubelet_plugin_package_imports_no_driver_code_but_the_protos() -> None:
    files = sorted(PACKAGE.glob("*.py"))
    assert PACKAGE / "services.py" in files
    crossing = sorted(
        f"{path.name}: {name}"
        for path in files
        for name in imported_names(path)
        if name.startswith(("driver.", "simdevice"))
        and not any(name == a or name.startswith(f"{a}.") for a in ALLOWED)
    )
    assert crossing == []
