"""The gateway's log layer ("ledgers to logs"): writer roles, appends with idempotency
keys, rolls, and reads across a log's ledgers; and the Logs API of docs/api.md over it."""
