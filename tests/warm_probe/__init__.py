"""A stand-in service for tests/unit/test_warm_start.py: ``python -m tests.warm_probe``."""
