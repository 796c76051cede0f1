"""Quire's shared core: settings, errors, metadata store, digests, bookie client, protocol."""
