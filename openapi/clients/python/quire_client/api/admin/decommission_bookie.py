from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.admin_bookie import AdminBookie
from ...models.decommission_bookie_response_400 import DecommissionBookieResponse400
from ...models.decommission_bookie_response_401 import DecommissionBookieResponse401
from ...models.decommission_bookie_response_404 import DecommissionBookieResponse404
from ...models.decommission_bookie_response_503 import DecommissionBookieResponse503
from ...types import Response


def _get_kwargs(
    bookie_id: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/admin/bookies/{bookie_id}/decommission".format(
            bookie_id=quote(str(bookie_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    AdminBookie
    | DecommissionBookieResponse400
    | DecommissionBookieResponse401
    | DecommissionBookieResponse404
    | DecommissionBookieResponse503
    | None
):
    if response.status_code == 202:
        response_202 = AdminBookie.from_dict(response.json())

        return response_202

    if response.status_code == 400:
        response_400 = DecommissionBookieResponse400.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = DecommissionBookieResponse401.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = DecommissionBookieResponse404.from_dict(response.json())

        return response_404

    if response.status_code == 503:
        response_503 = DecommissionBookieResponse503.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    AdminBookie
    | DecommissionBookieResponse400
    | DecommissionBookieResponse401
    | DecommissionBookieResponse404
    | DecommissionBookieResponse503
]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
) -> Response[
    AdminBookie
    | DecommissionBookieResponse400
    | DecommissionBookieResponse401
    | DecommissionBookieResponse404
    | DecommissionBookieResponse503
]:
    """Decommission a bookie (up or down): its state is decommissioning from this answer on, so no new
    ensemble chooses it; everything on it is re-replicated, then it is decommissioned. Idempotent.

    Args:
        bookie_id (str): the bookie's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AdminBookie | DecommissionBookieResponse400 | DecommissionBookieResponse401 | DecommissionBookieResponse404 | DecommissionBookieResponse503]
    """

    kwargs = _get_kwargs(
        bookie_id=bookie_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
) -> (
    AdminBookie
    | DecommissionBookieResponse400
    | DecommissionBookieResponse401
    | DecommissionBookieResponse404
    | DecommissionBookieResponse503
    | None
):
    """Decommission a bookie (up or down): its state is decommissioning from this answer on, so no new
    ensemble chooses it; everything on it is re-replicated, then it is decommissioned. Idempotent.

    Args:
        bookie_id (str): the bookie's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AdminBookie | DecommissionBookieResponse400 | DecommissionBookieResponse401 | DecommissionBookieResponse404 | DecommissionBookieResponse503
    """

    return sync_detailed(
        bookie_id=bookie_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
) -> Response[
    AdminBookie
    | DecommissionBookieResponse400
    | DecommissionBookieResponse401
    | DecommissionBookieResponse404
    | DecommissionBookieResponse503
]:
    """Decommission a bookie (up or down): its state is decommissioning from this answer on, so no new
    ensemble chooses it; everything on it is re-replicated, then it is decommissioned. Idempotent.

    Args:
        bookie_id (str): the bookie's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AdminBookie | DecommissionBookieResponse400 | DecommissionBookieResponse401 | DecommissionBookieResponse404 | DecommissionBookieResponse503]
    """

    kwargs = _get_kwargs(
        bookie_id=bookie_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
) -> (
    AdminBookie
    | DecommissionBookieResponse400
    | DecommissionBookieResponse401
    | DecommissionBookieResponse404
    | DecommissionBookieResponse503
    | None
):
    """Decommission a bookie (up or down): its state is decommissioning from this answer on, so no new
    ensemble chooses it; everything on it is re-replicated, then it is decommissioned. Idempotent.

    Args:
        bookie_id (str): the bookie's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AdminBookie | DecommissionBookieResponse400 | DecommissionBookieResponse401 | DecommissionBookieResponse404 | DecommissionBookieResponse503
    """

    return (
        await asyncio_detailed(
            bookie_id=bookie_id,
            client=client,
        )
    ).parsed
