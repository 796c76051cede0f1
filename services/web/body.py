"""Reading request bodies: bounded, and told apart as JSON or raw."""

from __future__ import annotations

from fastapi import Request

from services.errors import InvalidArgument, PayloadTooLarge


async def read_body(request: Request, limit: int) -> bytes:
    """The whole request body, refused with 413 as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise InvalidArgument("bad Content-Length")
        if int(declared) > limit:
            raise PayloadTooLarge(f"body of {declared} bytes over the limit of {limit}")
        return await request.body()
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise PayloadTooLarge(f"body over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def is_json(request: Request) -> bool:
    """API.md: a request with ``Content-Type: application/json`` (any parameters) is JSON."""
    content_type = request.headers.get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower() == "application/json"
