"""The controller's in-memory stores treat resourceVersion as opaque: the
event that arrives last wins, whatever its version looks like."""

from typing import Any

from driver.controller.stores import Store


def obj(name: str, version: str, value: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version}, "value": value}


def value_of(o: Any) -> int:
    return int(o["value"])


def test_the_last_event_wins_whatever_its_version() -> None:
    store = Store(value_of)
    store.replace([obj("a", "9", 1)])
    assert store.apply("MODIFIED", obj("a", "10", 2)) == (1, 2)  # "10" < "9" as text
    assert store.apply("MODIFIED", obj("a", "3", 3)) == (2, 3)  # 3 < 10 as numbers
    assert store.apply("MODIFIED", obj("a", "opaque-xyz", 4)) == (3, 4)
    assert store.get("a") == 4


def test_delete_and_add_and_namespaced_keys() -> None:
    store = Store(value_of)
    store.replace([obj("a", "1", 1)])
    assert store.apply("DELETED", obj("a", "2", 1)) == (1, None)
    assert store.apply("DELETED", obj("a", "3", 1)) == (None, None)
    added = obj("b", "4", 5)
    added["metadata"]["namespace"] = "ns"
    assert store.apply(None, added) == (None, 5)
    assert store.items() == {"ns/b": 5}
