"""Prints what a started process sees, then exits with the code asked for, or waits for a
signal: ``python -m tests.warm_probe CODE|wait``."""

from __future__ import annotations

import json
import os
import random
import signal
import sys

from services.web import server


def main() -> None:
    seen = {
        "argv": sys.argv,
        "main": __name__,
        "cwd": os.getcwd(),
        "probe": os.environ.get("PROBE"),
        "absent": os.environ.get("PROBE_ABSENT"),
        "session": os.getsid(0) == os.getpid(),
        "stdin": sys.stdin.read(),
        "random": random.random(),
        "jitter": server._jitter.random(),
    }
    print(json.dumps(seen), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    if sys.argv[1] == "wait":
        signal.pause()
    raise SystemExit(int(sys.argv[1]))


if __name__ == "__main__":
    main()
