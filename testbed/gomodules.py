"""The versions the Go modules under hack/ pin, as `go mod edit` reads them."""

import json
import subprocess
from pathlib import Path

HACK = Path(__file__).resolve().parents[1] / "hack"


def required_version(module_dir: Path, path: str) -> str:
    listing = subprocess.run(
        ["go", "mod", "edit", "-json"], cwd=module_dir, capture_output=True, text=True, check=True
    )
    requires = json.loads(listing.stdout)["Require"]
    version: str = next(r["Version"] for r in requires if r["Path"] == path)
    return version
