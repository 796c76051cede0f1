"""The admin web page's files (served by gateway/admin/page.py)."""
