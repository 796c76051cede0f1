"""What routes get injected: the running bookie."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from bookie.node import BookieNode


async def get_node(request: Request) -> BookieNode:
    return request.app.state.node


NodeDep = Annotated[BookieNode, Depends(get_node)]
