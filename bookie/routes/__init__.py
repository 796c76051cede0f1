"""The bookie's HTTP routes (bookie/API.md)."""
