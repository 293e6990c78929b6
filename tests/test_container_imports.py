"""The image's workload entry point (`driver/container.py`) runs inside user
containers: nothing it imports, directly or through other modules of
the project's packages, may come from the local cluster (`localsim`)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("driver", "simdevice", "localsim", "whatif")


def module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def project_imports(path: Path) -> set[str]:
    """The project's modules a file imports, with the packages that hold them."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] in PACKAGES:
                found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {name for name in found if module_file(name) is not None}


def transitive_imports(module: str) -> set[str]:
    seen, todo = {module}, [module]
    while todo:
        path = module_file(todo.pop())
        assert path is not None
        for name in project_imports(path) - seen:
            seen.add(name)
            todo.append(name)
    return seen


def test_the_walk_follows_imports_through_other_modules() -> None:
    # podsync does not import driver.node.cdi itself; workloadclient does
    assert "driver.node.cdi" in transitive_imports("localsim.standin.podsync")


def test_the_container_entry_point_imports_nothing_of_the_local_cluster() -> None:
    reached = transitive_imports("driver.container")
    assert "driver.claimendpoint" in reached
    assert sorted(m for m in reached if m.startswith("localsim")) == []
