"""hack/lib/debian-packages.sh names each missing package once, however many
of its commands are missing (iptables provides both iptables and
iptables-save), and a non-root user is told what to install instead of
being asked for root it does not have."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_package_missing_for_two_commands_is_named_once() -> None:
    script = (
        f". {ROOT / 'hack/lib/debian-packages.sh'}; "
        "id() { echo 1000; }; "  # as a non-root user: nothing is installed
        "install_missing 'the real-node cluster' no-such-cmd-a:pkg-a no-such-cmd-b:pkg-a "
        "no-such-cmd-c:pkg-c"
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "the real-node cluster needs pkg-a pkg-c: run as root, or install them with "
        "apt-get install pkg-a pkg-c"
    )
