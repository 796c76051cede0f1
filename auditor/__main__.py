"""``python -m auditor --zk HOST:PORT --port P``: run an auditor."""

from __future__ import annotations

from auditor.app import create_app
from services.json_logging import setup_logging
from services.settings import AuditorSettings, load_settings
from services.web.serve import serve, tls_contexts

PROG = "python -m auditor"


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(AuditorSettings, argv, prog=PROG)
    setup_logging("auditor", settings.log_level)
    tls = tls_contexts(settings, PROG)
    serve(create_app(settings, tls.client if tls else None), settings, tls=tls)


if __name__ == "__main__":
    main()
