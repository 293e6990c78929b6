"""Which package may import which, checked on the source: a row per package and
per shared module, read from the bottom up, and no exception.

The controller and the node daemon share only the device model, the
apiserver client and the small shared modules; the kubelet-plugin machinery
knows nothing of Trainium; `simdevice` knows nothing of Kubernetes; the
node daemon reaches the apiserver through `driver.kubeapi` only. Nothing in
`driver` (what the image carries) imports the local cluster (`localsim`) or
the what-if (`whatif`), the checkout's tools beside it.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ("driver.names", "driver.jsontypes")
"""Plain names and type aliases: anything may import them."""

ALLOWED: dict[str, tuple[str, ...]] = {
    "simdevice": (),
    "driver.names": (),
    "driver.jsontypes": (),
    "driver.procstat": (),
    "driver.workqueue": (),
    "driver.mainwait": (),
    "driver.httpendpoint": (),
    "driver.kopfrun": (),
    "driver.claimendpoint": (),
    "driver.kubeletplugin": (),
    "driver.kubeapi": (),
    "driver.devicemodel": ("simdevice",),
    "driver.container": ("driver.claimendpoint", "driver.mainwait"),
    "driver.nccomtest": ("simdevice", "driver.claimendpoint"),
    "driver.controller": (
        "simdevice",
        "driver.devicemodel",
        "driver.kubeapi",
        "driver.httpendpoint",
        "driver.kopfrun",
        "driver.workqueue",
    ),
    "driver.usoperator": (
        "driver.devicemodel",
        "driver.kubeapi",
        "driver.httpendpoint",
        "driver.kopfrun",
    ),
    "driver.node": (
        "simdevice",
        "driver.devicemodel",
        "driver.kubeapi",
        "driver.kubeletplugin",
        "driver.httpendpoint",
        "driver.mainwait",
    ),
    "localsim": (
        "simdevice",
        "driver.devicemodel",
        "driver.kubeapi",
        "driver.kubeletplugin",
        "driver.node",
        "driver.container",
        "driver.claimendpoint",
        "driver.mainwait",
        "driver.workqueue",
    ),
    "whatif": (
        "simdevice",
        "driver.devicemodel",
        "driver.kubeapi",
        "localsim",
        "driver.procstat",
    ),
    "driver.cli": (),
    "testbed": (
        "simdevice",
        "driver.devicemodel",
        "driver.kubeapi",
        "driver.controller",
        "driver.node",
        "localsim",
        "driver.container",
        "driver.usoperator",
    ),
    "benchmarks": (
        "simdevice",
        "driver.devicemodel",
        "driver.kubeapi",
        "driver.controller",
        "driver.kubeletplugin",
        "localsim",
        "whatif",
        "driver.usoperator",
        "driver.procstat",
        "testbed",
    ),
}
"""Package (or module) -> the project's packages it may import besides itself
and SHARED."""

FORBIDDEN_OUTSIDE: dict[str, tuple[str, ...]] = {
    "simdevice": ("kubernetes", "kopf"),
    "driver.node": ("kubernetes",),  # every request goes through driver.kubeapi's one pool
    "driver.kubeletplugin": ("kubernetes", "kopf"),
}
"""Third-party packages a package must not import."""

OURS = ("driver", "simdevice", "localsim", "whatif", "testbed", "benchmarks", "tests")


def package_of(module: str) -> str:
    """`driver.node.sim.simhost` -> `driver.node`; `benchmarks.x` -> `benchmarks`."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "driver" and len(parts) > 1 else parts[0]


def source_files() -> dict[str, Path]:
    """Every module of the project's code (tests aside) by its dotted name."""
    out = {}
    for top in ("driver", "simdevice", "localsim", "whatif", "testbed", "benchmarks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "gen" in path.relative_to(ROOT).parts:
                continue
            out[".".join(path.relative_to(ROOT).with_suffix("").parts)] = path
    return out


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_every_package_has_a_row() -> None:
    packages = {package_of(m) for m in source_files()} - {"driver.__init__"}
    assert packages - set(ALLOWED) == set(), "add a row to ALLOWED for each"
    assert set(ALLOWED) - packages == set(), "a row for a package that no longer exists"


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_what_its_row_allows(package: str) -> None:
    allowed = {package, *SHARED, *ALLOWED[package]}
    forbidden = FORBIDDEN_OUTSIDE.get(package, ())
    crossing = sorted(
        f"{module}: {name}"
        for module, path in source_files().items()
        if package_of(module) == package
        for name in imports(path)
        if (name.split(".")[0] in OURS and package_of(name) not in allowed and name != "driver")
        or name.split(".")[0] in forbidden
    )
    assert crossing == [], f"{package} may import only {sorted(allowed)}"


def test_no_package_imports_one_that_imports_it() -> None:
    """The rows form no cycle: each package sits above everything it imports."""
    seen: list[str] = []

    def visit(package: str, path: tuple[str, ...]) -> None:
        assert package not in path, f"import cycle: {' -> '.join((*path, package))}"
        if package in seen:
            return
        for below in ALLOWED.get(package, ()):
            visit(below, (*path, package))
        seen.append(package)

    for package in ALLOWED:
        visit(package, ())


def test_test_packages_import_no_other_test_package() -> None:
    """What two test packages share lives in testbed/, never in one of them."""
    crossing = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        parts = path.relative_to(ROOT / "tests").parts
        own = parts[0] if len(parts) > 1 else None
        for name in imports(path):
            words = name.split(".")
            if words[0] == "tests" and len(words) > 2 and words[1] != own:
                crossing.append(f"{path.relative_to(ROOT)}: {name}")
    assert crossing == []
