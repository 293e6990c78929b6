"""Where results and pages live."""

from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
RESULTS_DIR: Final = ROOT / "benchmarks" / "results"
DOCS: Final = ROOT / "docs"
