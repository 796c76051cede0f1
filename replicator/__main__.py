"""``python -m replicator --zk HOST:PORT --port P``: run a replication worker."""

from __future__ import annotations

from replicator.app import create_app
from services.json_logging import setup_logging
from services.settings import ReplicatorSettings, load_settings
from services.web.serve import serve, tls_contexts

PROG = "python -m replicator"


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(ReplicatorSettings, argv, prog=PROG)
    setup_logging("replicator", settings.log_level)
    tls = tls_contexts(settings, PROG)
    serve(create_app(settings, tls.client if tls else None), settings, tls=tls)


if __name__ == "__main__":
    main()
