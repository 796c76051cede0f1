"""The admin web page's files (served by gateway/routes/admin_page.py)."""
