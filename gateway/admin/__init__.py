"""The Admin API of docs/api.md (cluster, bookies, under-replication, decommission) and
the admin web page."""
