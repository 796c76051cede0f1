"""The bookie's own state: info and the run-time read-only threshold."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from bookie.models import SECRET_REFUSED, BookieInfo, DiskThreshold
from bookie.routes.deps import NodeDep
from services.errors import InvalidArgument
from services.web.errors import error_responses, explained

router = APIRouter(prefix="/v1", tags=["bookie"])


@router.get(
    "/info",
    summary="Identity and state of this bookie",
    response_model=BookieInfo,
    responses=error_responses(SECRET_REFUSED),
)
async def info(node: NodeDep) -> JSONResponse:
    return JSONResponse(node.info())


@router.post(
    "/admin/disk-threshold",
    summary="Change the read-only free-disk threshold at run time",
    description=(
        "The bookie goes read-only while the free fraction of its disk is under the "
        "threshold. The new value is applied at once (a disk check runs immediately)."
    ),
    response_model=BookieInfo,
    responses=error_responses(explained(InvalidArgument, "bad body"), SECRET_REFUSED),
)
async def set_disk_threshold(body: DiskThreshold, node: NodeDep) -> JSONResponse:
    node.set_readonly_threshold(body.readonly_free_ratio)
    return JSONResponse(node.info())
