"""The auditor (``python -m auditor``): elected, it marks under-replicated ledgers."""
