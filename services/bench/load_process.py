"""One load generator process of ``quire bench`` (started by services/bench/procs.py):

    python -m services.bench.load_process '{"host": ..., "port": ..., "client_ledgers": [[1], ...]}'

The spec picks the generator: ``GatewayLoad`` (services/bench/load.py) by default,
``StreamLoad`` with ``"stream"`` (``--stream``), ``LogLoad`` with ``"log"`` (``--log``).
Its answers go to stdout, one JSON object per line (services/bench/load.py).
"""

from __future__ import annotations

import json
import sys

from services.bench.load import GatewayLoad, run_loop
from services.bench.log_load import LogLoad
from services.bench.stream_load import StreamLoad


def main() -> None:
    spec = json.loads(sys.argv[1])
    load: GatewayLoad
    if spec.get("stream"):
        load = StreamLoad(spec)
    elif spec.get("log"):
        load = LogLoad(spec)
    else:
        load = GatewayLoad(spec)
    load.emit(run_loop(load.run()))


if __name__ == "__main__":
    main()
