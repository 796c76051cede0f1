"""The HTTP plumbing the gateway's APIs share: the token middleware, the injected
dependencies and canonical ids, bounded JSON input, batch bodies, and the OpenAPI
document's examples and links."""
