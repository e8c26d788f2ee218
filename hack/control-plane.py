#!/usr/bin/env python3
"""Start a throw-away etcd + kube-apiserver (+ kube-controller-manager) on 127.0.0.1.

    python hack/control-plane.py start [--bin-dir DIR] [--controller-manager]   # Ctrl-C stops

The code lives in hyperplace/localup/controlplane.py (shared with hack/local-up.sh and the
integration tests); run this with the project's .venv active.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hyperplace.localup.controlplane import main

if __name__ == "__main__":
    sys.exit(main())
