"""Every PromQL query of a Grafana dashboard, panels and template variables,
so the tests can check each one against promtool and a live Prometheus."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PanelQuery:
    """One PromQL target of a Grafana dashboard panel."""

    dashboard: str
    panel: str
    ref: str
    expr: str
    legend: str


def dashboard_queries(document: Mapping[str, Any]) -> list[PanelQuery]:
    """Every PromQL target of a dashboard, in panel order (rows' panels included)."""
    panels: list[Mapping[str, Any]] = []
    for panel in document.get("panels", []):
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return [
        PanelQuery(
            document["title"],
            panel["title"],
            target["refId"],
            target["expr"],
            target.get("legendFormat", ""),
        )
        for panel in panels
        for target in panel.get("targets", [])
        if target.get("expr")
    ]


def variable_queries(document: Mapping[str, Any]) -> list[PanelQuery]:
    """The dashboard's `label_values(selector, label)` variables as PromQL
    (`group by (label) (selector)`), so they can be checked like panels."""
    found = []
    for variable in document.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable["query"]
        text = query["query"] if isinstance(query, Mapping) else str(query)
        inner = text.removeprefix("label_values(").removesuffix(")")
        if inner == text or "," not in inner:
            raise ValueError(
                f"{document['title']} variable {variable['name']}: expected "
                f"label_values(selector, label), got {text!r}"
            )
        selector, label = (part.strip() for part in inner.rsplit(",", 1))
        expr = f"group by ({label}) ({selector})"
        found.append(PanelQuery(document["title"], f"${variable['name']}", "var", expr, label))
    return found
