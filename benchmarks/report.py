"""Write one benchmark's results: JSON under benchmarks/results/ and its own
section of docs/benchmarks.md, so several benchmarks share the page."""

import json
import platform
import re
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
PAGE_HEADER = """# Benchmarks

Each section below is written by one benchmark, with the command that made it.
Ratios compare against a baseline measured in the same run, so they travel
between machines better than the absolute figures.
"""


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    import os

    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
    }


def write_report(name: str, command: str, results: dict[str, Any], markdown: str) -> Path:
    """Store `results` as JSON and put `markdown` in the page's `name` section."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "command": command, "machine": machine(), "results": results}
    out = RESULTS_DIR / f"{name}.json"
    out.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")

    begin, end = f"<!-- bench:{name} begin -->", f"<!-- bench:{name} end -->"
    m = machine()
    section = (
        f"{begin}\n## {name}\n\nCommand: `{command}` — {m['date']}, {m['cpus']} CPUs, "
        f"Python {m['python']}.\n\n{markdown.strip()}\n{end}"
    )
    page = PAGE.read_text() if PAGE.exists() else PAGE_HEADER
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    page = (
        pattern.sub(lambda _: section, page)
        if pattern.search(page)
        else (page.rstrip("\n") + "\n\n" + section + "\n")
    )
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(page)
    return out
