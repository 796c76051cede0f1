"""A stand-in service for tests/integration/test_warm_start.py: ``python -m tests.warm_probe``."""
