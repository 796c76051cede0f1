"""The gateway's routers."""
