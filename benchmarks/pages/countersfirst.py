"""docs/scale.md's proposal for upstream: the allocator checking a device's
counters before its CEL selectors. The patch shown is the one in
hack/k8s-counters-first; the figures are the busy-fleet runs of
benchmarks/results/scheduler.json that have the counters-first arm, and the
section says so when none has."""

import hashlib
from typing import Any, Final

from benchmarks.pages.common import median, row, spread, values
from benchmarks.pages.scheduler import BUSY_ANCHOR, occupancy_notes, pairwise_ratios
from benchmarks.paths import ROOT
from testbed.countersfirst import ARM as COUNTERS_FIRST_ARM

PATCH: Final = ROOT / "hack" / "k8s-counters-first" / "counters-first.patch"
STOCK_ARM: Final = "node pools"
SHOWN_FILE: Final = "structured/internal/incubating/allocator_incubating.go"
"""The variant the 1.37 scheduler runs with the project's gates; the patch
changes the other two alike."""
KEY: Final = "scheduler_cpu_ms_per_pod"


def patch_hash() -> str:
    """As hack/k8s-counters-first/build.sh names its cache directory."""
    return hashlib.sha256(PATCH.read_bytes()).hexdigest()[:12]


def file_diff(patch: str, path: str) -> str:
    """The part of a unified diff that changes `path`."""
    parts = patch.split("diff --git ")
    return "diff --git " + next(p for p in parts if p.startswith(f"a/{path} "))


HEAD: Final = [
    "## Counters before selectors: a proposal for upstream",
    "",
    'On a busy fleet (docs/bench-scheduler.md, "Busy fleets") the scheduler\'s CPU per',
    "single-core pod grows with the share of cores already held for our node and",
    "server pool layouts, and hardly for per-node pools of the same devices without",
    "counters; the profile of those runs puts the growth in the device selectors",
    "(CEL).",
    "",
    "**Cause.** In `k8s.io/dynamic-resource-allocation` (the module the control",
    "plane's `hack/k8s/go.mod` pins), `allocateOne` in",
    f"`{SHOWN_FILE}` walks the",
    "node's devices for a request and, for each, skips it when it is in use, then",
    "evaluates the class's and the request's CEL selectors (`isSelectable`), and",
    "only then calls `allocateDevice`, whose `checkAvailableCounters` rejects a",
    "device whose counters are already consumed. A core of a held chip is not in",
    "use (the chip device is); only its counters are taken. So every such core",
    "costs a CEL evaluation for every node filtered for every pod, and the more of",
    "the fleet is held, the more of those there are. The scheduler picks the",
    "`incubating` variant here: `DRAConsumableCapacity` (on by default in 1.37)",
    "rules out `stable`, and no alpha gate of `experimental` is on. `stable` and",
    "`experimental` walk the devices in the same order.",
    "",
    "**The patch** (ours, `hack/k8s-counters-first/counters-first.patch`; the",
    "`incubating` part below, `stable` and `experimental` are changed alike, the",
    "`stable` one without the shared-device clause, which that variant has no",
    "feature for): right after the in-use check, `allocateOne` asks `countersFit`,",
    "which runs the same `checkAvailableCounters` and, when the device fits,",
    "releases what it reserved (`deallocateCountersForDevice`); a device that does",
    "not fit is skipped before its selectors.",
    "",
]

EXACT: Final = [
    "",
    "**Why the results do not change.** For a device whose counters do not fit,",
    "the stock order evaluates the selectors and, if they match, calls",
    "`allocateDevice`, which rejects it on the same `checkAvailableCounters` with",
    "no error (nothing before that check in `allocateDevice` returns an error:",
    "in use, the partitionable-devices gate, and in `experimental` the optional",
    "node operations and compatibility groups reject without one). The patch",
    "rejects it at once; either way the loop moves to the next device in the same",
    "order, so the same device is chosen. `countersFit` decides exactly as",
    "`allocateDevice` would: it passes whatever `allocateDevice` does not check",
    "(no counters, the partitionable-devices gate off, a further share of a",
    "shared device in use) and whatever fails with an error, and it leaves the",
    "consumed counters as it found them (quantities added and subtracted",
    "exactly). `allocationMode: All` is untouched: its devices are chosen in",
    "`validateDeviceRequest` with the selectors, as before, and `allocateOne`",
    "takes its own branch for them before the loop the patch changes, so a",
    "claim that cannot get all of them fails as before, with the same message.",
    "One thing changes: a selector that would fail to evaluate (a CEL runtime",
    "error) on a device whose counters are used up is no longer evaluated, so",
    "that error is not reported, as it already is not for a device in use: the",
    "claim is decided by the devices that are available.",
    "",
    "Checked by `make test-counters-first`, which `make test` does not run (it",
    "costs one more kube-scheduler build, minutes on a cold cache): upstream's",
    "allocator tests (`go test ./structured/...`) on the patched module, then",
    "`tests/countersfirst/`: one busy rack in the node pool layout, claims of one,",
    "two and eight cores, a server, and every core of a chip (`allocationMode:",
    "All`) pinned to some of its nodes, scheduled one at a time by the stock",
    "scheduler and then by the patched one: every claim must get the same",
    "devices, or the same refusal with the same message.",
    "",
    "**Build and measure.** `make scheduler-counters-first` builds the patched",
    "kube-scheduler once into `~/.cache/trainium-dra/k8s-counters-first/`,",
    "keyed by Kubernetes version and the patch's hash, and prints its path: the",
    "module's source is copied from the Go module cache, patched there and used",
    "through a `replace` in a copy of `hack/k8s/go.mod`; no cluster of",
    "`make demo` or `make test` runs it. `make bench-scheduler",
    "BENCH_ARGS='--steps occupancy --scheduler counters-first'` adds the node",
    "pools on the patched scheduler as an arm of its own, interleaved round by",
    "round with the stock arms; every run of such a step starts on a freshly",
    "started scheduler of its arm's build.",
    "",
]


def figures(scheduler: dict[str, Any] | None) -> list[str]:
    """Stock and patched node pools at each measured fleet and occupancy."""
    results = (scheduler or {}).get("results") or {}
    occupancy = results.get("occupancy") or {}
    rows = []
    measured: list[str] = []
    builds = set()
    for count, percents in occupancy.items():
        for percent, layouts in percents.items():
            patched, stock = layouts.get(COUNTERS_FIRST_ARM), layouts.get(STOCK_ARM)
            if not patched or not stock:
                continue
            builds |= {r.get("scheduler_build", "") for r in patched}
            if count not in measured:
                measured.append(count)
            anchor = layouts.get(BUSY_ANCHOR)
            same = all(a["bound"] == b["bound"] for a, b in zip(stock, patched, strict=False))
            rows.append(
                row(
                    count,
                    f"{percent}%",
                    spread(values(stock, KEY)),
                    spread(values(patched, KEY)),
                    pairwise_ratios(patched, stock, KEY),
                    pairwise_ratios(stock, anchor, KEY) if anchor else "",
                    pairwise_ratios(patched, anchor, KEY) if anchor else "",
                    f"{median(stock, 'bound'):g} / {median(patched, 'bound'):g}"
                    + ("" if same else " (differ)"),
                )
            )
    if not rows:
        return [
            "**Figures.** Not measured yet: no committed run of `make bench-scheduler` has",
            "the counters-first arm.",
        ]
    current = patch_hash()
    stale = sorted(b for b in builds if not b.endswith(current))
    lines = [
        "**Figures** (scheduler CPU per single-core pod, median and range of the",
        "rounds; `patched / stock` divides each round's patched run by the stock run",
        "of the same round; `vs anchor` by per-node pools of the same devices; `bound`:",
        "pods bound per run, median, stock / patched):",
        "",
        row(
            "racks",
            "held",
            "stock ms/pod",
            "patched ms/pod",
            "patched / stock",
            "stock vs anchor",
            "patched vs anchor",
            "bound",
        ),
        row(*["---"] * 8),
        *rows,
        *occupancy_notes(results, measured),
    ]
    if stale:
        lines += [
            "",
            f"Measured with a patch other than the committed one ({', '.join(stale)}; "
            f"the committed one's hash is {current}): measure again.",
        ]
    return lines


def section(scheduler: dict[str, Any] | None) -> list[str]:
    shown = file_diff(PATCH.read_text(), SHOWN_FILE)
    return [
        *HEAD,
        "```diff",
        *shown.rstrip("\n").splitlines(),
        "```",
        *EXACT,
        *figures(scheduler),
        "",
    ]
