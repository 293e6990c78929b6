#!/usr/bin/env python3
"""Generate the kubelet API modules (driver/kubeletplugin/protocol/gen/) with grpcio-tools.

Run at build time: `.venv/bin/python hack/gen_protos.py`. The package also
generates them on first import when they are missing.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from driver.kubeletplugin.protocol.generate import generate

if __name__ == "__main__":
    print(generate(force="--force" in sys.argv[1:]))
