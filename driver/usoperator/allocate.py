"""Which nodes each workload holds after one pass, and what its failure
strategy does when one of them fails. Pure: the workloads, the UltraServers
found and the allocations held in, one `Decision` per workload out.

Rules (docs/aws-neuron.md, "The UltraServer operator"):
- a workload takes `topologySize` nodes of one group (its pair or quad, any
  node for 1) in each of `serverCount` distinct UltraServers of its instance
  type; only healthy nodes no workload holds and no other claim uses;
- workloads are served oldest first; a first allocation is all or nothing;
- the UltraServer with the fewest free nodes that fits is taken first, so
  workloads pack and whole UltraServers stay free;
- a held node that fails: `NoOp` keeps everything and reports it;
  `RestartAll` gives back every node and allocates again from scratch;
  `MigrateAffected` replaces each failed node by a free healthy node of the
  same UltraServer, or moves that one group to another UltraServer, and keeps
  the rest (`PartiallyAllocated` while nothing fits).
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from driver.usoperator.model import Held, MemberNode, UltraServer, Workload


@dataclass(frozen=True)
class Decision:
    workload: Workload
    held: tuple[Held, ...]
    state: str
    reason: str
    message: str
    failed_nodes: tuple[str, ...] = ()
    """Nodes it held at the start of the pass that are unhealthy: what its
    strategy acted on (under NoOp it still holds them)."""
    replaced: Mapping[str, str] = field(default_factory=dict)
    """Failed node -> its replacement (MigrateAffected)."""
    restarted: bool = False
    """RestartAll gave everything back in this pass: every pod goes."""

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(n for h in self.held for n in h.nodes))


def decide(
    workloads: Iterable[Workload],
    servers: Mapping[str, UltraServer],
    held: Iterable[Held],
) -> list[Decision]:
    members = {m.name: (us, m) for us in servers.values() for m in us.nodes}
    live = sorted(workloads, key=lambda w: (w.created, w.key))
    keys = {w.key for w in live}
    by_workload: dict[str, list[Held]] = {}
    for h in held:
        if h.workload in keys:
            by_workload.setdefault(h.workload, []).append(h)
    taken = {n for hs in by_workload.values() for h in hs for n in h.nodes}
    decisions = []
    for w in live:
        mine = by_workload.get(w.key, [])
        decision = _decide_one(w, mine, servers, members, taken)
        taken.difference_update(n for h in mine for n in h.nodes)
        taken.update(decision.nodes)
        decisions.append(decision)
    return decisions


def _problem(node: str, members: Mapping[str, tuple[UltraServer, MemberNode]]) -> str:
    found = members.get(node)
    return "its devices are no longer published" if found is None else found[1].problem


def _decide_one(
    w: Workload,
    mine: list[Held],
    servers: Mapping[str, UltraServer],
    members: Mapping[str, tuple[UltraServer, MemberNode]],
    taken: set[str],
) -> Decision:
    if w.deleting:
        return Decision(w, (), "Deallocating", "Deleted", "releasing its nodes, template and pods")
    impossible = unsatisfiable(w, servers.values())
    if impossible:
        return Decision(w, (), "Failed", "Unsatisfiable", impossible)
    others = taken - {n for h in mine for n in h.nodes}
    failed = {n: _problem(n, members) for h in mine for n in h.nodes if _problem(n, members)}
    replaced: dict[str, str] = {}
    restarted = False
    if failed and w.strategy == "RestartAll":
        mine, restarted = [], True
    elif failed and w.strategy == "MigrateAffected":
        mine, replaced = _migrate(mine, servers, failed, others)
    kept = [*mine]
    missing = w.server_count - len(kept)
    if missing > 0:
        in_use = others | {n for h in kept for n in h.nodes}
        found = find_groups(w, servers.values(), in_use, {h.ultraserver for h in kept}, missing)
        if kept or len(found) == missing:
            kept += found
    return _outcome(w, tuple(kept), failed, replaced, restarted)


def _outcome(
    w: Workload,
    held: tuple[Held, ...],
    failed: Mapping[str, str],
    replaced: Mapping[str, str],
    restarted: bool,
) -> Decision:
    nodes = sum(len(h.nodes) for h in held)
    where = ", ".join(sorted(h.ultraserver for h in held))
    failures = "; ".join(f"{n}: {why}" for n, why in sorted(failed.items()))
    if len(held) == w.server_count:
        state = "Allocated"
        if not failed and _acted_on(w, held):
            reason, message = str(w.status["reason"]), str(w.status["message"])
        elif not failed:
            reason, message = "Allocated", f"{nodes} nodes on {len(held)} UltraServers: {where}"
        elif w.strategy == "NoOp":
            reason, message = "Degraded", f"{failures}; failureStrategy NoOp: nothing moved"
        elif restarted:
            reason, message = "Restarted", f"{failures}; every node given back, now on {where}"
        else:
            moves = ", ".join(f"{a} -> {b}" for a, b in sorted(replaced.items()))
            reason, message = "Migrated", f"{failures}; moved {moves or 'the affected group'}"
    elif held:
        state, reason = "PartiallyAllocated", "WaitingForNodes"
        message = (
            f"{len(held)} of {w.server_count} UltraServers held ({failures or 'waiting'}); "
            f"waiting for a free group of {w.topology_size} healthy nodes"
        )
    else:
        state, reason = "Pending", "WaitingForNodes"
        message = (
            f"no {w.server_count} UltraServers of {w.instance_type} each with {w.topology_size} "
            "free healthy nodes in one group yet"
            + (f" ({failures}; every node given back)" if restarted else "")
        )
    return Decision(
        w,
        held,
        state,
        reason,
        message,
        failed_nodes=tuple(sorted(failed)),
        replaced=dict(replaced),
        restarted=restarted,
    )


def _acted_on(w: Workload, held: Sequence[Held]) -> bool:
    """Whether the workload's last status told of a restart or migration onto
    exactly these nodes: that news stays its reason until its nodes change."""
    nodes = sorted(n for h in held for n in h.nodes)
    return w.status.get("reason") in ("Restarted", "Migrated") and w.status.get("nodes") == nodes


def _migrate(
    mine: Sequence[Held],
    servers: Mapping[str, UltraServer],
    failed: Mapping[str, str],
    taken: set[str],
) -> tuple[list[Held], dict[str, str]]:
    """Each failed node replaced by a spare of its UltraServer; a group without
    enough spares is given back whole (the top-up then looks elsewhere)."""
    kept, replaced = [], {}
    in_use = taken | {n for h in mine for n in h.nodes}
    for h in mine:
        bad = [n for n in h.nodes if n in failed]
        if not bad:
            kept.append(h)
            continue
        us = servers.get(h.ultraserver)
        spares = [m.name for m in us.nodes if _free(m, in_use)] if us else []
        if len(spares) < len(bad):
            continue
        swap = dict(zip(bad, spares, strict=False))
        in_use.update(swap.values())
        replaced.update(swap)
        kept.append(replace(h, nodes=tuple(sorted(swap.get(n, n) for n in h.nodes))))
    return kept, replaced


def _free(member: MemberNode, taken: set[str]) -> bool:
    return member.healthy and not member.busy and member.name not in taken


def free_groups(us: UltraServer, size: int, taken: set[str]) -> list[tuple[str, ...]]:
    """Disjoint groups of `size` nodes of one pair or quad, every node free."""
    groups: dict[str, list[MemberNode]] = {}
    for m in us.nodes:
        if size in m.groups:
            groups.setdefault(m.groups[size], []).append(m)
    return [
        tuple(m.name for m in members)
        for _, members in sorted(groups.items())
        if len(members) == size and all(_free(m, taken) for m in members)
    ]


def find_groups(
    w: Workload,
    servers: Iterable[UltraServer],
    taken: set[str],
    exclude: set[str],
    count: int,
) -> list[Held]:
    """Up to `count` groups for `w`, one per UltraServer, fullest UltraServer first."""
    fitting = [us for us in servers if us.instance_type == w.instance_type and us.id not in exclude]
    fitting.sort(key=lambda us: (sum(_free(m, taken) for m in us.nodes), us.id))
    out = []
    for us in fitting:
        groups = free_groups(us, w.topology_size, taken)
        if groups:
            out.append(Held(w.key, w.workload_id, us.id, groups[0]))
        if len(out) == count:
            break
    return out


def unsatisfiable(w: Workload, servers: Iterable[UltraServer]) -> str:
    """Why no state of this cluster's UltraServers could ever hold `w`; empty if one could."""
    same = [us for us in servers if us.instance_type == w.instance_type]
    if len(same) < w.server_count:
        return (
            f"spec.serverCount: {w.server_count} UltraServers of {w.instance_type} asked, the "
            f"cluster has {len(same)}; lower spec.serverCount or add UltraServers"
        )
    fits = [us for us in same if _any_group(us, w)]
    if len(fits) < w.server_count:
        sizes = sorted({len(us.nodes) for us in same})
        return (
            f"spec.topologySize: {w.server_count} UltraServers of {w.instance_type} with "
            f"{w.topology_size} nodes of one group asked, {len(fits)} have them (nodes per "
            f"UltraServer: {', '.join(map(str, sizes))}); lower spec.topologySize"
        )
    return ""


def _any_group(us: UltraServer, w: Workload) -> bool:
    """A group of the size exists, whatever its nodes' health and use now."""
    counts: dict[str, int] = {}
    for m in us.nodes:
        if w.topology_size in m.groups:
            counts[m.groups[w.topology_size]] = counts.get(m.groups[w.topology_size], 0) + 1
    return any(c == w.topology_size for c in counts.values())
