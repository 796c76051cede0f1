"""``python -m bookie --zk HOST:PORT --port P --data-dir DIR``: run a bookie.

Before the HTTP server starts, the data dir is locked and the cookie is
checked; a refusal prints one line on stderr saying what happened and how to
fix it, and exits with status 3.
"""

from __future__ import annotations

import asyncio
import sys

from bookie.app import create_app
from bookie.cookie import check_cookie
from bookie.storage import DataDirInUse, lock_data_dir
from services.errors import CookieMismatch, MetadataUnavailable
from services.logs import setup_logging
from services.settings import BookieSettings, load_settings
from services.web.serve import serve
from services.zk.store import MetadataStore

PROG = "python -m bookie"
EXIT_REFUSED = 3


async def preflight(settings: BookieSettings) -> str:
    """Lock the data dir for this process and verify (or create) the cookie."""
    lock_data_dir(settings.data_dir)
    store = MetadataStore(settings.zk_hosts, session_timeout_s=settings.zk_session_timeout)
    try:
        await store.start(30.0)
        return await check_cookie(
            store, settings.address, settings.data_dir, settings.zk, settings.zk_root
        )
    finally:
        await store.stop()


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(BookieSettings, argv, prog=PROG)
    setup_logging("bookie", settings.log_level)
    try:
        asyncio.run(preflight(settings))
    except (CookieMismatch, DataDirInUse, MetadataUnavailable) as exc:
        print(f"{PROG}: error: {exc.message}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_REFUSED) from None
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
