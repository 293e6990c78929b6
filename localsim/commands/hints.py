"""The lines that tell the user what to run next. `trainium-dra` and `kubectl`
live in the virtualenv, whose bin directory a newcomer's shell does not have
on PATH, so every block of such commands starts with the line that puts it
there: each block works as printed, from any directory."""

import os
import shlex
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"


def path_export() -> str:
    """Puts this virtualenv's bin directory, where both commands are, first on PATH."""
    bin_dir = shlex.quote(str(Path(sys.executable).parent))
    return f"export PATH={bin_dir}:$PATH   # trainium-dra and kubectl"


def kubeconfig_export(kubeconfig: Path) -> str:
    return f"export KUBECONFIG={shlex.quote(str(kubeconfig))}"


def example(folder: Path) -> str:
    """An example's folder as a path from the current directory, for `kubectl -f`."""
    return shlex.quote(os.path.relpath(folder)) + "/"
