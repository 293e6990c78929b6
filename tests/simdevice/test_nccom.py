"""The `nccom-test` command: AWS's flags and table, the model's answers, and
errors that name the flag. The installed console script runs as a real
program too. (Its answer from the node daemon, inside a workload container,
is tested in tests/node/test_collectives_api.py and on the clusters.)"""

import subprocess
import sys
from pathlib import Path

import pytest

from driver.nccomtest import main, request_of
from simdevice.collectives import time_collective
from simdevice.fabric import first_chips, rank_places
from simdevice.nccom import (
    CLAIM_ENV,
    GENERATION_ENV,
    UsageError,
    parse,
    parse_chips,
    parse_size,
    sizes,
)
from simdevice.topology import rack_spec

GEN2 = rack_spec("trn3-gen2")
GIB = float(1 << 30)
COLUMNS = ["size(B)", "count(elems)", "type", "time:avg(us)", "algbw(GB/s)", "busbw(GB/s)"]


def rows(out: str) -> tuple[list[str], list[list[str]], float]:
    """Header, rows and the average of nccom-test's output."""
    lines = out.strip().splitlines()
    assert lines[-1].startswith("Avg bus bandwidth:\t") and lines[-1].endswith("GB/s")
    average = float(lines[-1].split("\t")[1].removesuffix("GB/s"))
    return lines[0].split(), [line.split() for line in lines[1:-1]], average


def test_sizes_and_units_follow_nccom_test() -> None:
    assert parse_size("-b", "32M") == 32 << 20
    assert parse_size("-b", "1kb") == 1024
    assert parse_size("-b", "1MB") == 1 << 20
    assert parse_size("-b", "4GiB") == 4 << 30
    assert sizes(8, 16, 4, None) == [8, 12, 16]  # the guide's -b 8 -e 16 -i 4
    assert sizes(8, 32, None, 2) == [8, 16, 32]  # the guide's -b 8 -e 32 -f 2
    assert sizes(100, 200, None, None) == [100 + 10 * i for i in range(11)]
    assert parse_chips("--chips", "0,1,4-6") == [(0, 0), (0, 1), (0, 4), (0, 5), (0, 6)]
    assert parse_chips("--chips", "0:3,1:3") == [(0, 3), (1, 3)]


def test_output_table_is_the_models_answer(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["-r", "8", "--chips", "0-7", "-b", "1KB", "-e", "1GB", "-f", "32", "-d", "bf16"]
    assert main([*argv, "--show-algorithm", "allr"]) == 0
    header, table, average = rows(capsys.readouterr().out)
    assert header == [*COLUMNS, "algorithm"]
    assert [int(r[0]) for r in table] == [1 << 10, 1 << 15, 1 << 20, 1 << 25, 1 << 30]
    places = first_chips(GEN2, 8)
    busbws = []
    for row in table:
        size = int(row[0])
        t = time_collective("all-reduce", GEN2, places, size)
        assert int(row[1]) == size // 2 and row[2] == "bf16"
        assert float(row[3]) == pytest.approx(t.duration * 1e6, abs=0.01)
        assert float(row[4]) == pytest.approx(t.algbw / GIB, abs=0.01)
        assert float(row[5]) == pytest.approx(t.busbw / GIB, abs=0.01)
        assert row[6] == "hier"
        busbws.append(t.busbw / GIB)
    assert average == pytest.approx(sum(busbws) / len(busbws), abs=1e-4)


def test_in_a_container_the_node_places_the_claims_ranks() -> None:
    """Without --chips the command asks the node: it sends no chip of the
    claim, only the peers' and what to time."""
    run = parse(["-r", "6", "--peers", "8,9", "-n", "3", "-w", "1", "allg"], {CLAIM_ENV: "u"})
    assert run.places is None and run.peers == [(0, 8), (0, 9)]
    assert request_of(run) == {
        "operation": "all-gather",
        "nworkers": 6,
        "sizes": [32 << 20],
        "algorithm": None,
        "peers": [[0, 8], [0, 9]],
        "iterations": 4,
    }
    forced = parse(["-r", "2", "--chips", "0,4", "allg"], {CLAIM_ENV: "u"})
    assert forced.places == rank_places(GEN2, [(0, 0), (0, 4)])


def test_offline_generation_comes_from_the_claims_environment() -> None:
    trn2 = rack_spec("trn2")
    run = parse(["-r", "2", "--chips", "0,16", "allr"], {GENERATION_ENV: "trn2"})
    assert run.generation == "trn2" and run.places == rank_places(trn2, [(0, 0), (0, 16)])
    flag = parse(["-r", "2", "--chips", "0,4", "--generation", "trn3-gen1", "allr"], {})
    assert flag.generation == "trn3-gen1"
    assert parse(["-r", "2", "--chips", "0,4", "allr"], {}).generation == "trn3-gen2"


@pytest.mark.parametrize(
    ("argv", "env", "starts"),
    [
        (["-r", "2", "allr"], {}, "--chips: no chips"),
        (["-r", "4", "--chips", "0,1", "allr"], {}, "-r/--nworkers: 4 ranks need 4 chips"),
        (["-r", "4", "--chips", "0-3", "--peers", "4", "allr"], {}, "--peers: only inside"),
        (["-r", "4", "--peers", "4,y", "allr"], {CLAIM_ENV: "u"}, "--peers: 'y' is not a chip"),
        (["-r", "4", "--generation", "trn2", "allr"], {CLAIM_ENV: "u"}, "--generation: only"),
        (["-r", "2", "--chips", "0,1", "allr"], {GENERATION_ENV: "trn9"}, "--generation: $"),
        (["-r", "2", "--chips", "0,x", "allr"], {}, "--chips: 'x' is not a chip"),
        (["-r", "2", "--chips", "0,0", "allr"], {}, "--chips: chips: rack 0 chip 0 is given twice"),
        (["-r", "2", "--chips", "0,200", "allr"], {}, "--chips: chips: chip 200"),
        (["-r", "2", "--chips", "0,1", "-d", "fp64", "allr"], {}, "-d/--datatype: 'fp64'"),
        (["-r", "2", "--chips", "0,1", "-b", "lots", "allr"], {}, "-b/--minbytes: 'lots'"),
        (["-r", "2", "--chips", "0,1", "-b", "2M", "-e", "1M", "allr"], {}, "-e/--maxbytes"),
        (["-r", "2", "--chips", "0,1", "-f", "1", "allr"], {}, "-f/--stepfactor"),
        (["-r", "2", "--chips", "0,1", "-i", "1", "-f", "2", "allr"], {}, "-i/--stepbytes"),
        (["-r", "2", "--chips", "0,1", "-n", "0", "allr"], {}, "-n/--iters"),
        (["-r", "2", "--chips", "0,1", "alltoallv"], {}, "operation: alltoallv"),
        (["-r", "2", "--chips", "0,1", "bcast"], {}, "operation: 'bcast'"),
    ],
)
def test_argument_errors_name_the_flag(argv: list[str], env: dict[str, str], starts: str) -> None:
    with pytest.raises(UsageError) as err:
        parse(argv, env)
    assert str(err.value).startswith(starts)


def test_a_model_refusal_exits_2_with_its_field(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-r", "3", "--chips", "0-2", "sendrecv"]) == 2
    assert capsys.readouterr().err.startswith("nccom-test: chips: send-receive pairs")
    assert main(["-r", "12", "--chips", "0-11", "--algorithm", "rdh", "allr"]) == 2
    assert "algorithm: rdh does not apply" in capsys.readouterr().err


def test_the_installed_command_runs() -> None:
    """The console script pyproject.toml declares (the image installs it the same way)."""
    script = Path(sys.executable).parent / "nccom-test"
    done = subprocess.run(
        [str(script), "-r", "2", "--chips", "0:5,1:5", "allr"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    header, table, _ = rows(done.stdout)
    assert header == COLUMNS and len(table) == 1
    t = time_collective("all-reduce", GEN2, rank_places(GEN2, [(0, 5), (1, 5)]), 32 << 20)
    assert float(table[0][5]) == pytest.approx(t.busbw / GIB, abs=0.01)
    bad = subprocess.run(
        [str(script), "-r", "two", "allr"], capture_output=True, text=True, check=False, timeout=60
    )
    assert bad.returncode == 2 and "-r/--nworkers" in bad.stderr
