"""Running one input edge's property under hypothesis and counting the outcomes.

A check gets one generated input and returns `ACCEPTED` or `REFUSED`, or
one outcome per case when an input is a batch of cases that share one slow
round (a daemon's prepare cycle, a controller's restore); any exception (a
crash of the code under test, or a refusal that does not name its field and
allowed values) fails the run, which hypothesis then shrinks to the smallest
input that shows it.
"""

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

T = TypeVar("T")
ACCEPTED = "accepted"
REFUSED = "refused"
HANG = "hang"

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)
"""Any JSON document, small."""


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of `choices`, each as often as its weight says (hypothesis's one_of
    would favour the richer branch)."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(lambda i: table[i])


def either(valid: st.SearchStrategy[Any], *odd: Any) -> st.SearchStrategy[Any]:
    """Mostly valid values, sometimes a listed odd one, sometimes any JSON."""
    if not odd:
        return weighted((6, valid), (1, JSON_VALUES))
    return weighted((6, valid), (1, st.sampled_from(odd)), (1, JSON_VALUES))


def maybe_field(
    fields: dict[str, st.SearchStrategy[Any]], required: tuple[str, ...] = ()
) -> st.SearchStrategy[dict[str, Any]]:
    """An object with the `required` fields and any of the others, mostly;
    sometimes with an unknown field too, sometimes missing a required one."""
    always = {k: v for k, v in fields.items() if k in required}
    others = {k: v for k, v in fields.items() if k not in required}
    complete = st.fixed_dictionaries(always, optional=others)
    partial = st.fixed_dictionaries({}, optional=fields)
    unknown = st.tuples(complete, st.text(min_size=1, max_size=8), JSON_VALUES).map(
        lambda t: {**t[0], t[1]: t[2]}
    )
    return weighted((6, complete), (1, unknown), (1, partial))


@dataclass(frozen=True)
class FuzzRun:
    edge: str
    cases: int
    accepted: int
    refused: int
    crashes: int
    hangs: int
    lost: int
    seconds: float
    failure: str = ""
    rounds: int = 0
    """Inputs hypothesis generated; fewer than `cases` when each is a batch."""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["seconds"] = round(self.seconds, 1)
        return out


def run_property(
    edge: str,
    strategy: st.SearchStrategy[T],
    check: Callable[[T], str | Sequence[str]],
    examples: int,
    raise_failure: bool = True,
) -> FuzzRun:
    """`examples` generated inputs through `check`; the counts of what happened."""
    outcomes: Counter[str] = Counter()
    rounds = 0

    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
    )
    @given(strategy)
    def prop(value: T) -> None:
        nonlocal rounds
        outcome = check(value)
        outcomes.update([outcome] if isinstance(outcome, str) else outcome)
        rounds += 1

    started = time.monotonic()
    failure = ""
    try:
        prop()
    except Exception as err:
        if raise_failure:
            raise
        notes = getattr(err, "__notes__", [])  # hypothesis's smallest failing input
        failure = " ".join([f"{type(err).__name__}: {err}", *notes])[:2000]
    return FuzzRun(
        edge=edge,
        cases=sum(outcomes.values()),
        accepted=outcomes[ACCEPTED],
        refused=outcomes[REFUSED],
        crashes=1 if failure else 0,
        hangs=outcomes[HANG],
        lost=outcomes["lost"],
        seconds=time.monotonic() - started,
        failure=failure,
        rounds=rounds,
    )


def refusal_names(message: str, field: str, allowed: tuple[str, ...]) -> None:
    """A refusal must start with the field's path and say what is allowed."""
    assert message.startswith(field), f"refusal does not name {field!r}: {message!r}"
    assert any(a in message for a in allowed), (
        f"refusal of {field!r} does not say the allowed values {allowed}: {message!r}"
    )
