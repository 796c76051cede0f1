from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.admin_bookie import AdminBookie
from ...models.error import Error
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


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> AdminBookie | Error | None:
    if response.status_code == 202:
        response_202 = AdminBookie.from_dict(response.json())

        return response_202

    if response.status_code == 400:
        response_400 = Error.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Error.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Error.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Error.from_dict(response.json())

        return response_404

    if response.status_code == 503:
        response_503 = Error.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[AdminBookie | Error]:
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
) -> Response[AdminBookie | Error]:
    """Decommission a bookie (up or down): its state is decommissioning from this answer on, so no new
    ensemble chooses it; everything on it is re-replicated, then it is decommissioned. Idempotent.

    Args:
        bookie_id (str): the bookie's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AdminBookie | Error]
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
) -> AdminBookie | Error | None:
    """Decommission a bookie (up or down): its state is decommissioning from this answer on, so no new
    ensemble chooses it; everything on it is re-replicated, then it is decommissioned. Idempotent.

    Args:
        bookie_id (str): the bookie's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AdminBookie | Error
    """

    return sync_detailed(
        bookie_id=bookie_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
) -> Response[AdminBookie | Error]:
    """Decommission a bookie (up or down): its state is decommissioning from this answer on, so no new
    ensemble chooses it; everything on it is re-replicated, then it is decommissioned. Idempotent.

    Args:
        bookie_id (str): the bookie's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AdminBookie | Error]
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
) -> AdminBookie | Error | None:
    """Decommission a bookie (up or down): its state is decommissioning from this answer on, so no new
    ensemble chooses it; everything on it is re-replicated, then it is decommissioned. Idempotent.

    Args:
        bookie_id (str): the bookie's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AdminBookie | Error
    """

    return (
        await asyncio_detailed(
            bookie_id=bookie_id,
            client=client,
        )
    ).parsed
