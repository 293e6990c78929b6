"""The controller's in-memory stores treat resourceVersion as opaque (the
event that arrives last wins, whatever its version looks like), and a relist
forgets objects whose deletion no watch reported without losing events that
arrive while it lists."""

from collections.abc import Iterator
from typing import Any

import pytest

from driver.controller.stores import Store


def obj(name: str, version: str, value: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version}, "value": value}


def value_of(o: Any) -> int:
    return int(o["value"])


def test_the_last_event_wins_whatever_its_version() -> None:
    store = Store(value_of)
    store.relist(lambda: [obj("a", "9", 1)])
    assert store.apply("MODIFIED", obj("a", "10", 2)) == (1, 2)  # "10" < "9" as text
    assert store.apply("MODIFIED", obj("a", "3", 3)) == (2, 3)  # 3 < 10 as numbers
    assert store.apply("MODIFIED", obj("a", "opaque-xyz", 4)) == (3, 4)
    assert store.get("a") == 4


def test_delete_and_add_and_namespaced_keys() -> None:
    store = Store(value_of)
    store.relist(lambda: [obj("a", "1", 1)])
    assert store.apply("DELETED", obj("a", "2", 1)) == (1, None)
    assert store.apply("DELETED", obj("a", "3", 1)) == (None, None)
    added = obj("b", "4", 5)
    added["metadata"]["namespace"] = "ns"
    assert store.apply(None, added) == (None, 5)
    assert store.items() == {"ns/b": 5}


def test_a_relist_forgets_what_no_event_deleted_and_names_what_changed() -> None:
    store = Store(value_of)
    assert store.relist(lambda: [obj("a", "1", 1), obj("b", "2", 2)]) == {"a", "b"}
    # "b" was deleted while no watch ran (a watch restarting lists only what exists).
    assert store.relist(lambda: [obj("a", "1", 1), obj("c", "3", 3)]) == {"b", "c"}
    assert store.items() == {"a": 1, "c": 3}
    assert store.relist(lambda: [obj("a", "1", 1), obj("c", "3", 3)]) == set()


def test_events_applied_while_listing_win_over_the_list() -> None:
    store = Store(value_of)
    store.relist(lambda: [obj("a", "1", 1), obj("b", "2", 2)])

    def listing() -> Iterator[dict[str, Any]]:
        # The list was read before these events; the watch delivers them meanwhile.
        store.apply("MODIFIED", obj("a", "5", 10))
        store.apply("DELETED", obj("b", "6", 2))
        store.apply("ADDED", obj("d", "7", 4))
        yield obj("a", "1", 1)
        yield obj("b", "2", 2)

    # Each event already reported its own change; the list adds none.
    assert store.relist(listing) == set()
    assert store.items() == {"a": 10, "d": 4}
    # After the list, events apply as before and are no longer set aside.
    assert store.apply("DELETED", obj("d", "8", 4)) == (4, None)
    assert store.relist(lambda: [obj("a", "5", 10)]) == set()


def test_a_failed_list_changes_nothing_and_stops_setting_events_aside() -> None:
    store = Store(value_of)
    store.relist(lambda: [obj("a", "1", 1)])

    def failing() -> Iterator[dict[str, Any]]:
        store.apply("MODIFIED", obj("a", "2", 2))
        raise ConnectionError("apiserver gone")
        yield obj("a", "1", 1)

    with pytest.raises(ConnectionError):
        store.relist(failing)
    assert store.items() == {"a": 2}
    assert store.relist(lambda: [obj("a", "3", 3)]) == {"a"}
    assert store.items() == {"a": 3}
