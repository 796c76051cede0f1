"""Streaming appends over a WebSocket (docs/streaming.md): the session, its targets (a
ledger's write handle, a log's writer) and the routes."""
