"""The `realrack` section of docs/bench-real-nodes.md, from
benchmarks/results/realrack.json: a whole Gen2 rack on real kubelets."""

from typing import Any

from benchmarks.pages.common import table


def span(values: list[float], fmt: str = "{:.0f}") -> str:
    return f"{fmt.format(min(values))} to {fmt.format(max(values))}"


def prepare_rows(r: dict[str, Any]) -> str:
    rows = []
    for phase in ("gang", "fill"):
        seen = r[phase]["kubelet_grpc_ms"]
        for call, s in seen["calls"].items():
            if not s["count"]:
                continue
            rows.append(
                (phase, call, f"{seen['kubelets_read']}", f"{s['count']:.0f}", f"{s['mean']:.1f}")
            )
    return table(("phase", "call", "kubelets read", "calls", "kubelet gRPC mean ms"), rows)


def fill_text(f: dict[str, Any]) -> str:
    steps = f["steps"]
    if not steps:
        return f"No pod of the fill ran: {f['stopped']}."
    last = steps[-1]
    loads = ", ".join(f"{step['load_1min']:.0f}" for step in steps)
    used = f["available_before_mib"] - last["available_mib"]
    per_pod = used / last["pods"]
    memory = f["node_memory_full"].values()
    total = [m["memory_mib"] for m in memory]
    system = [m["system_memory_mib"] for m in memory]
    return (
        f"{last['pods']:,} of the rack's {f['cores']:,} cores held by as many Running pods, "
        f"created {f['batch']} at a time, in {last['seconds']:.0f} s "
        f"({last['pods'] / last['seconds']:.1f} pods/s); it stopped because "
        f"{f['stopped']} (its limits in this run: no batch started after "
        f"{f['budget_s']:,.0f} s, none below {f['memory_floor_mib']:,.0f} MiB of available "
        "memory). The host's 1-minute load average after each batch, on "
        f"{f['cpus']} CPUs: {loads}. "
        f"The host's available memory fell by {used:,.0f} MiB, "
        f"{per_pod:.1f} MiB per pod (its sandbox, its shim, the kubelet's and the "
        f"daemon's share, the control plane's objects). With the fill running, each "
        f"node's cgroup held {span(total)} MiB, of which the kubelet, containerd, the "
        f"shims and kube-proxy {span(system)} MiB. Deleting the fill's namespace took "
        f"{f['delete_s']:.0f} s."
    )


def gang_text(g: dict[str, Any]) -> str:
    if "stopped" not in g:
        return (
            f"{g['pods']} pods sharing one claim of the rack, all Running on "
            f"{g['nodes_used']} nodes {g['create_to_all_running_s']:.0f} s after `kubectl apply`, "
            f"and every one's job started on its node's daemon after "
            f"{g['create_to_all_started_s']:.0f} s ({g['waited_for_api']} of them repeated "
            "their start because a request outlasted its timeout while the daemons planned)."
        )
    errors = "; ".join(f"{n} pods: `{line}`" for line, n in g["container_errors"].items())
    return (
        f"{g['pods']} pods sharing one claim of the rack, on {g['nodes_used']} nodes, did not "
        f"all run: {g['stopped']}. How the failed containers ended: {errors or 'none failed'}."
    )


def render(payload: dict[str, Any]) -> str:
    """The section's body for the results of `benchmarks.realrack`."""
    r = payload["results"]
    idle = r["idle"].values()
    mem = [v["memory_mib"] for v in idle]
    system = [v["system_memory_mib"] for v in idle]
    cpu = [v["cpu_percent"] for v in idle]
    g = r["gang"]
    in_use = r["available_before_start_mib"] - r["available_idle_mib"]
    return f"""A whole {r["generation"]} UltraServer on {r["nodes"]} real nodes (kubelet,
containerd and kube-proxy each in network and mount namespaces of its own, with
the chart's pods in each node's cgroup), started by `trainium-dra up --real-nodes
--generation {r["generation"]}` on this one machine. Not part of the tests.

Start-up until every node is Ready and the chart's pods run (images imported,
certificates issued, helm install): {r["start_s"]:.0f} s. The host's memory in use
rose by {in_use:,.0f} MiB from before the start to the idle cluster (control plane,
{r["nodes"]} nodes, the chart's pods).

Per node, idle for {r["idle_seconds"]:.0f} s (cgroup `memory.stat` rss + mapped
files; `cpuacct.usage`): memory {span(mem)} MiB, of which the kubelet, containerd,
the shims and kube-proxy {span(system)} MiB; CPU {span(cpu, "{:.1f}")} % of one core.

The whole-rack gang example (deploy/examples/whole-rack, applied as a user
would): {gang_text(g)}

{fill_text(r["fill"])}

The kubelets' own `dra_grpc_operations_duration_seconds` for our driver, summed
over the nodes whose kubelet answered both scrapes of the phase:

{prepare_rows(r)}
"""
