"""What routes get injected: the running bookie."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from bookie.node import BookieNode
from services.errors import Unavailable


async def get_node(request: Request) -> BookieNode:
    """The running bookie; 503 ``unavailable`` while it is not open yet (bookie.node)."""
    node: BookieNode | None = request.app.state.node
    if node is None:
        raise Unavailable("the bookie is starting: not serving data yet")
    node.check_open()
    return node


NodeDep = Annotated[BookieNode, Depends(get_node)]
