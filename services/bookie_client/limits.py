"""The bookie client's own bounds (docs/style.md §5), each named with its unit last.

Bounds of the API every service shares are in ``services/limits.py``; the time-outs a
service passes its pool (``BookieClientPool``) come from its settings
(``services/settings.py``), the ones here are what a client uses when given none.
"""

from __future__ import annotations

# HTTP/1.1 connections to one bookie (services/bookie_client/transport.py): connecting
# waits at most this long; at most this many are open; an idle one is dropped after this
# long, well before uvicorn closes an idle keep-alive connection (30 s,
# services/web/serve.py), so we rarely race the server's close.
CONNECT_TIMEOUT_S = 2.0
CONNECTIONS_MAX = 16
IDLE_CONNECTION_MAX_S = 15.0
# An answer's head, and its body: a range read returns at most 8 MiB of payload, but its
# first entry always comes whole (up to 5 MiB); add record headers and digests and round
# up. A large body is read in pieces of this size (``_read_exactly``).
RESPONSE_HEAD_MAX_BYTES = 64 * 1024
RESPONSE_BODY_MAX_BYTES = 32 * 1024 * 1024
BODY_PIECE_BYTES = 256 * 1024
# A request body up to this size is written with its head in one write (a copy); a
# larger one is written after it.
COALESCE_MAX_BYTES = 256 * 1024

# One bookie's calls (services/bookie_client/client.py): a request's time-out when the
# caller gives none, and the LAC long polls waiting at once on one bookie.
REQUEST_TIMEOUT_S = 10.0
LONG_POLLS_MAX = 16

# The callback-driven adds (services/bookie_client/channel.py). A request's time-out ran
# out: the verdict waits this long, for the loop to poll the sockets once (an answer read
# meanwhile is no time-out).
POLL_GRACE_S = 0.001
# Time-outs a request may wait in all while its bookie is alive (channel.py's docstring):
# a busy bookie is waited for, within this bound.
BUSY_TIMEOUTS_MAX = 8
