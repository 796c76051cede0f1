"""The bookie's HTTP routes (docs/api.md "Bookie")."""
