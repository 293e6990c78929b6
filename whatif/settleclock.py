"""The settle clock's decisions, apart from the replay that drives it: when
the cluster has answered an event time's writes. A step (`Step`) remembers
the scheduler's state before the writes; the deciders (`Deciders`) read the
scheduler's and the controller's /metrics until both have taken the writes
up and stopped moving. Reading is a callable, so tests drive it with
readings of their own."""

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from whatif.observe import WorkState
from whatif.podwatch import NamespaceView
from whatif.settlecost import SettleCosts


@dataclass(frozen=True)
class SettleClock:
    """Simulated time jumps from event to event once the cluster has settled.
    The scheduler's state comes from its /metrics at `metrics_url`, the
    controller's from its own; while pods wait, both must be idle and read the
    same twice `quiet` wall seconds apart (no attempt, no event handled in
    between), as an event not yet received would otherwise look like a
    decision. A settle longer than `timeout` wall
    seconds is logged and counted, and the replay goes on."""

    metrics_url: str
    token: str
    controller_metrics_url: str | None = None
    """The driver's controller's /metrics: its pending work counts as unsettled."""
    quiet: float = 0.1
    timeout: float = 300.0


@dataclass(frozen=True)
class SettleStats:
    """How the settle clock spent its wall time."""

    events: int
    """Event times it settled at."""
    wall_p50: float | None
    wall_max: float | None
    timeouts: int
    costs: dict[str, float] = field(default_factory=dict)
    """Per event time: wall seconds by part and /metrics read (`SettleCosts.summary`)."""


@dataclass(frozen=True)
class Step:
    """The cluster and the replay before one event time's writes. `state` is
    None when no pod of the replay waited then (none unschedulable, none
    undecided, none held back): every pod that waits after the writes was
    then tried after they began, which is what comparing the scheduler's
    progress with `state` would have shown, so the clock does not read it."""

    state: WorkState | None
    creations: int
    deletions: int
    faulted: bool
    """Faults were injected or cleared: the slices change under the scheduler."""

    def wrote(self, creations: int, deletions: int) -> bool:
        """Whether this event time wrote, given the replay's counts now."""
        return self.faulted or (creations, deletions) != (self.creations, self.deletions)


def needs_baseline(view: NamespaceView) -> bool:
    """Whether a pod of the replay waits before a step's writes (`Step`):
    unschedulable, held back by Kueue, or not yet decided or seen."""
    return bool(view.unsettled() or view.waiting or view.queued)


class Deciders:
    """Whether the scheduler and the driver's controller may still change
    something for a waiting pod at this event time. Both must have taken up
    this step's writes (the scheduler has handled events since they began;
    when a release may let a waiting rack job in, the controller has queued or
    reconciled work since the namespace showed it, as it moves the rack
    guard), be idle, and read unchanged across the clock's quiet seconds.

    Each reading of the scheduler's /metrics is half a megabyte of text the
    scheduler renders and the replay parses, so the clock reads only what a
    decision needs: no reading when the namespace shows the writes (the first
    look at a waiting pod takes the state then), and the controller's only
    while a release may let a waiting rack job in."""

    CONTROLLER_GRACE = 10.0
    """Wall seconds after which a controller that took up nothing is taken
    to have nothing to do: longer than the delay it batches claim changes by,
    and than the seconds it took to advertise a rack again after some
    seventy claims in it went at once."""

    def __init__(
        self,
        read: Callable[[bool], WorkState],
        clock: SettleClock,
        before: WorkState | None,
        *,
        costs: SettleCosts,
    ) -> None:
        """`read(controller)`: the deciders' state now, the controller's part
        only when asked; `before`: the scheduler's before the writes (`Step`)."""
        self.read, self.clock, self.before, self.costs = read, clock, before, costs
        self.since: float | None = None
        """When the namespace first showed this step's writes."""
        self.shown: WorkState | None = None
        """The scheduler's state at the first look at a waiting pod since then."""
        self.shown_reconciled: float | None = None
        """The controller's reconciles at the first look that needed them."""
        self.controller_took = False
        self.reconciles: tuple[float, float, float] | None = None
        """The controller's reconcile count, the scheduler's progress and the
        time when that count was first seen to grow in this step."""

    def showing(self) -> None:
        """The namespace shows this step's writes (pods and claims deleted
        are gone): what the deciders do from now on is their answer to them."""
        if self.since is None:
            self.since = time.monotonic()

    def moving(self, *, wrote: bool, controller: bool, waiting: int) -> str:
        """Why a decider may still move for the `waiting` pods ("" if none
        will): `wrote`, this step wrote; `controller`, the controller's next
        reconcile may change what the scheduler can place."""
        first = self.read(controller)
        self.showing()
        assert self.since is not None
        if self.shown is None:
            self.shown = first
        if controller and self.shown_reconciled is None:
            self.shown_reconciled = first.reconciled
        if wrote and self.before is not None and first.progress == self.before.progress:
            return "the scheduler has not yet taken up this step's writes"
        if controller:
            assert self.shown_reconciled is not None
            self.controller_took |= (
                first.controller > 0
                or first.reconciled > self.shown_reconciled
                or time.monotonic() - self.since > self.CONTROLLER_GRACE
            )
            if not self.controller_took:
                return "the controller has not yet taken up the released claims"
            if self._controller_writes_unseen(first, self.shown_reconciled):
                return "the scheduler has not yet taken up the controller's writes"
        if first.busy(controller):
            return "the scheduler or the controller has work"
        if first.backoff:
            # Pods that keep failing cycle through backoff (a gang that does
            # not fit does): each must be one of the replay's waiting pods and
            # have failed twice since the namespace showed this step's writes,
            # the second time a backoff (a second or more) after any event
            # those writes caused had reached the scheduler.
            retried = first.failed - self.shown.failed
            if first.backoff > waiting or retried < 2 * first.backoff:
                return "the scheduler retries pods after a backoff"
            return ""
        with self.costs.part("quiet"):
            time.sleep(self.clock.quiet)
        second = self.read(controller)
        if second.progress != first.progress or second.busy(controller) or second.backoff:
            return "the scheduler or the controller is still moving"
        return ""

    def _controller_writes_unseen(self, state: WorkState, shown: float) -> bool:
        """The controller reconciled in this step (it may have advertised a
        rack device again) and the scheduler has handled nothing since, for
        less than the grace a reconcile that wrote nothing is given."""
        if state.reconciled <= shown:
            return False
        if self.reconciles is None or self.reconciles[0] != state.reconciled:
            self.reconciles = (state.reconciled, state.progress, time.monotonic())
        _, progress, since = self.reconciles
        return state.progress == progress and time.monotonic() - since < self.CONTROLLER_GRACE
