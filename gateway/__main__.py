"""``python -m gateway --zk HOST:PORT --port P``: run a gateway."""

from __future__ import annotations

import sys

from gateway.app import create_app
from gateway.http.scopes import TokenFileError
from gateway.limits import STREAM_MESSAGE_MAX_BYTES
from services.json_logging import setup_logging
from services.settings import GatewaySettings, load_settings
from services.web.serve import serve, tls_contexts

PROG = "python -m gateway"


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(GatewaySettings, argv, prog=PROG)
    setup_logging("gateway", settings.log_level)
    tls = tls_contexts(settings, PROG)
    try:
        app = create_app(settings, tls.client if tls else None)
    except TokenFileError as exc:  # one line, as an impossible setting is refused
        print(f"{PROG}: error: --token-file {settings.token_file}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    serve(app, settings, websocket_message_max_bytes=STREAM_MESSAGE_MAX_BYTES, tls=tls)


if __name__ == "__main__":
    main()
