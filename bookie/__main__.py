"""``python -m bookie --zk HOST:PORT --port P --data-dir DIR``: run a bookie.

Before the HTTP server starts, the data dir is locked. The server then
serves ``/health`` (503 until registered) and ``/metrics`` at once, while the
bookie connects to ZooKeeper in the background and checks its cookie
(bookie.node). A refusal (data dir in use, a cookie that does not match)
prints one line on stderr saying what happened and how to fix it, and exits
with status 3.
"""

from __future__ import annotations

import signal
import sys

from bookie.app import create_app
from bookie.storage import lock_data_dir
from services.errors import DataDirInUse
from services.json_logging import setup_logging
from services.settings import BookieSettings, load_settings
from services.web.serve import serve, tls_contexts

PROG = "python -m bookie"
EXIT_REFUSED = 3


def refuse(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_REFUSED)


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(BookieSettings, argv, prog=PROG)
    setup_logging("bookie", settings.log_level)
    tls = tls_contexts(settings, PROG)
    try:
        lock_data_dir(settings.data_dir)
    except DataDirInUse as exc:
        refuse(exc.message)
    app = create_app(settings)

    def after_sigterm(signum: int, frame: object) -> None:
        # uvicorn restores this handler after its graceful stop and raises the signal
        # again. A refusal found while serving stopped the server with SIGTERM: exit 3.
        if app.state.refusal is not None:
            refuse(app.state.refusal)
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    signal.signal(signal.SIGTERM, after_sigterm)
    serve(app, settings, tls=tls)
    if app.state.refusal is not None:
        refuse(app.state.refusal)


if __name__ == "__main__":
    main()
