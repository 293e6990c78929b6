"""`trainium-dra` command: one entry point, each component owns its flags."""

import importlib
import sys

COMMANDS = {
    "controller": ("driver.controller.main", "run the UltraServer controller (kopf operator)"),
    "node": ("driver.node.main", "run the node daemon (kubelet DRA plugin)"),
    "ultraserver-operator": (
        "driver.usoperator.main",
        "run the simulated Neuron UltraServer operator (AWS profile)",
    ),
    "workload": ("driver.container", "inside a workload container: show the claim, run work"),
    "controlplane": (
        "driver.localsim.commands.controlplane",
        "start or stop a local Kubernetes control plane",
    ),
    "up": (
        "driver.localsim.commands.up",
        "start a local cluster with simulated UltraServers (make demo)",
    ),
    "down": ("driver.localsim.commands.down", "stop the local cluster and remove its state"),
    "status": (
        "driver.localsim.commands.status",
        "racks, devices, allocations and unhealthy devices",
    ),
    "top": ("driver.localsim.commands.top", "live per-core utilization of a rack"),
    "whatif": ("driver.whatif.main", "replay a job trace on simulated racks (offline anchor)"),
}


def usage() -> str:
    lines = ["usage: trainium-dra COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<13} {summary}" for name, (_, summary) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"trainium-dra: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    result: int = module.main(rest)
    return result


if __name__ == "__main__":
    sys.exit(main())
