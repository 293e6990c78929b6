"""`trainium-dra` command: one entry point, each component owns its flags.

The driver's own commands live in `driver`, which the image carries; the
local cluster's (`localsim`) and the what-if's (`whatif`) are packages of a
checkout beside it, which the image leaves out."""

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
        "localsim.commands.controlplane",
        "start or stop a local Kubernetes control plane",
    ),
    "up": (
        "localsim.commands.up",
        "start a local cluster with simulated UltraServers (make demo)",
    ),
    "down": ("localsim.commands.down", "stop the local cluster and remove its state"),
    "status": (
        "localsim.commands.status",
        "racks, devices, allocations and unhealthy devices",
    ),
    "top": ("localsim.commands.top", "live per-core utilization of a rack"),
    "whatif": ("whatif.cli", "replay a job trace on simulated racks (offline anchor)"),
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
    name = COMMANDS[command][0]
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name != name.split(".")[0] or name.startswith("driver."):
            raise
        print(
            f"trainium-dra {command}: runs from a checkout of trainium-dra (its {err.name}/ "
            "package), not from the driver's image; see docs/quickstart.md",
            file=sys.stderr,
        )
        return 2
    result: int = module.main(rest)
    return result


if __name__ == "__main__":
    sys.exit(main())
