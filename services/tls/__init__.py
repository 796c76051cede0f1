"""TLS for the services' HTTP hops (docs/security.md, "TLS").

``contexts``: the server and client ``ssl.SSLContext`` of a service, built from its
certificate chain, key and CA bundle, and re-read in place on SIGHUP.
``certificates``: a local certificate authority and the leaf certificates it signs
(subject alternative names: DNS names and IP addresses), for the tests and local
clusters.
"""
