"""The error answers that the Ledgers and Logs APIs' add routes document alike.

An add or append answered with one of these may or may not have been written: the
client settles it by reading (docs/api.md, "Errors")."""

from __future__ import annotations

from services.errors import LedgerFenced, QuorumTimeout
from services.web.errors import noted

FENCED = noted(LedgerFenced, "outcome unknown")
TIMED_OUT = noted(QuorumTimeout, "outcome unknown")
