"""The Ledgers API of docs/api.md: its REST models and routes."""
