"""The scheduler profile's summary and the page table it feeds."""

from benchmarks.pages.scheduler import profile_part
from benchmarks.scheduler_profile import PARTS, parse_top, summarize_rows

PLUGIN = "k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
DRA = "k8s.io/dynamic-resource-allocation/structured/internal"
TOP = "\n".join(
    [
        "File: kube-scheduler",
        "Type: cpu",
        "Duration: 20.13s, Total samples = 9.80s (48.68%)",
        "Showing nodes accounting for 9.41s, 96.02% of 9.80s total",
        "      flat  flat%   sum%        cum   cum%",
        f"         0     0%     0%      6.20s 63.27%  {PLUGIN}.(*DynamicResources).Filter",
        f"     0.10s  1.02%  1.02%      4.90s 50.00%  {DRA}/experimental.(*Allocator).Allocate",
        f"     0.05s  0.51%  1.53%      2.00s 20.41%  {DRA}/experimental.GatherPools",
        f"     0.02s  0.2%   1.73%      0.90s  9.18%  {DRA}/incubating.GatherPools",
        "     1.50s 15.31% 17.04%      1.50s 15.31%  runtime.memclrNoHeapPointers",
        f"     0.70s  7.14% 24.18%      1.10s 11.22%  "
        f"{DRA}/experimental.(*allocator).checkAvailableCounters",
    ]
)


def test_rows_are_read_with_their_shares() -> None:
    rows = parse_top(TOP)
    assert len(rows) == 6
    assert rows[0].cum_percent == 63.27
    assert rows[4].flat_percent == 15.31
    assert rows[5].function.endswith("checkAvailableCounters")


def test_a_part_takes_the_largest_share_among_its_functions() -> None:
    summary = summarize_rows(parse_top(TOP))
    parts = summary["parts_cum_percent"]
    assert isinstance(parts, dict)
    assert set(parts) == set(PARTS)
    assert parts["pool gathering"] == 20.41  # experimental, not incubating
    assert parts["counter checks"] == 11.22
    assert parts["node selectors"] == 0.0  # absent from the profile
    top = summary["top_flat"]
    assert isinstance(top, list)
    assert top[0]["function"] == "runtime.memclrNoHeapPointers"


def test_page_shows_each_profiled_layout_and_part() -> None:
    summary = summarize_rows(parse_top(TOP))
    run = {"profile": summary, "profile_seconds": 20}
    lines = profile_part({"10": {"node pools": [run, run], "per-node pools": [{}]}})
    text = "\n".join(lines)
    assert "first 20 s" in text
    table = [line for line in lines if line.startswith("| 10 ")]
    assert len(table) == 1  # the layout without a profile has no row
    assert "node pools" in table[0]
    assert "20.4%" in table[0]


def test_page_has_no_profile_section_without_profiles() -> None:
    assert profile_part({"1": {"node pools": [{"scheduler_cpu_ms_per_pod": 1.0}]}}) == []
