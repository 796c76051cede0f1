"""The generated clients under openapi/clients/ are what openapi/gateway.json generates
now (else: make openapi), generated afresh by the pinned generators (make setup)."""

from __future__ import annotations

from services.web import clients


def test_generated_clients_are_current() -> None:
    problems = clients.stale()
    assert not problems, "\n".join([*problems, "the clients are stale: run 'make openapi'"])
