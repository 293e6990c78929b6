"""Reading py-spy's collapsed stacks: the share of an entry point's samples each
function below it holds."""

from pathlib import Path

from benchmarks.pyspy import RATE, function_of, prepare_profile, shares_under

ROOT = "dra_handler.<locals>.prepare"
STACKS = [
    "_worker (concurrent/futures/thread.py:83);"
    "dra_handler.<locals>.prepare (driver/kubeletplugin/services.py:81);"
    "Preparer.prepare (driver/node/prepare.py:175);"
    "ApiServer.get_json (driver/kubeapi/apiserver.py:186) 6",
    "_worker (concurrent/futures/thread.py:83);"
    "dra_handler.<locals>.prepare (driver/kubeletplugin/services.py:81);"
    "Preparer.prepare (driver/node/prepare.py:183);"
    "Checkpoint._append (driver/node/durable/checkpoint.py:234) 3",
    "_worker (concurrent/futures/thread.py:83);"
    "dra_handler.<locals>.unprepare (driver/kubeletplugin/services.py:97) 40",
    "health_loop (driver/node/health.py:20) 11",
    "",
]


def test_a_frame_loses_its_line_number_only() -> None:
    assert function_of("f (a/b.py:12)") == "f (a/b.py)"
    assert function_of("g (<frozen os>)") == "g (<frozen os>)"


def test_shares_count_only_samples_under_the_root_and_lines_of_one_function_together() -> None:
    samples, ranked = shares_under(STACKS, ROOT, top=10)
    assert samples == 6 + 3  # the unprepare and health-loop samples are not under prepare
    shares = dict((str(name), share) for name, share in ranked)
    assert shares["Preparer.prepare (driver/node/prepare.py)"] == 1.0
    assert shares["ApiServer.get_json (driver/kubeapi/apiserver.py)"] == 6 / 9
    assert shares["Checkpoint._append (driver/node/durable/checkpoint.py)"] == 3 / 9
    assert not any("_worker" in name or "services.py" in name for name in shares)


def test_top_keeps_the_largest_shares_first() -> None:
    _, ranked = shares_under(STACKS, ROOT, top=2)
    assert [name for name, _ in ranked] == [
        "Preparer.prepare (driver/node/prepare.py)",
        "ApiServer.get_json (driver/kubeapi/apiserver.py)",
    ]


def test_no_sample_under_the_root_gives_nothing() -> None:
    assert shares_under(STACKS, "nowhere", top=5) == (0, [])


def test_the_profiles_of_several_processes_count_as_one(tmp_path: Path) -> None:
    outs = [tmp_path / "1.txt", tmp_path / "2.txt"]
    outs[0].write_text("\n".join(STACKS[:2]))
    outs[1].write_text("\n".join(STACKS[2:]) + "\n" + STACKS[0])
    profile = prepare_profile(outs)
    assert profile["root"] == ROOT and profile["rate_hz"] == RATE
    assert profile["samples"] == 6 + 3 + 6
