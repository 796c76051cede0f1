"""Quire's shared core: settings, errors, metadata store, digests, bookie client, protocol."""

from services import native

native.install()  # the compiled add path, when built and current (services/native.py)
