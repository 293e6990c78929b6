"""`nccom-test`: AWS's collectives benchmark, answered by the simulator.

Inside a workload container it asks the node daemon, through the claim's
endpoint on the workload API, to time the collectives on the claim's own
chips (the node knows them; the container names only the chips of ranks
outside the claim, `--peers`). With `--chips` it times them here, without a
cluster. The flags, the parsing and the table are `simdevice.nccom`'s.
"""

import os
import sys
from collections.abc import Mapping, Sequence

from driver.claimendpoint import ClaimEndpoint, ClaimEndpointError
from simdevice.nccom import Row, Run, offline_rows, parse, table


def request_of(run: Run) -> dict[str, object]:
    """The workload API's collectives request for `run`."""
    return {
        "operation": run.operation,
        "nworkers": run.nworkers,
        "sizes": run.sizes,
        "algorithm": run.algorithm,
        "peers": [list(p) for p in run.peers or ()],
        "iterations": run.iterations,
    }


def claim_rows(run: Run, env: Mapping[str, str]) -> list[Row]:
    """The node daemon's answer on the claim's chips."""
    answer = ClaimEndpoint.from_environment(env).collectives(request_of(run))
    return [
        Row(r["size"], r["duration"], r["algbw"], r["busbw"], r["algorithm"])
        for r in answer["rows"]
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 2 on bad arguments (as argparse does), 1 when the node refuses or
    cannot be reached."""
    try:
        run = parse(sys.argv[1:] if argv is None else argv, os.environ)
        rows = offline_rows(run) if run.places is not None else claim_rows(run, os.environ)
    except ClaimEndpointError as err:
        print(f"nccom-test: {err}", file=sys.stderr)
        return 1
    except ValueError as err:
        print(f"nccom-test: {err}", file=sys.stderr)
        return 2
    print(table(run, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
