from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.storage_report import StorageReport
from ...types import Response


def _get_kwargs(
    bookie_id: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/admin/bookies/{bookie_id}/storage".format(
            bookie_id=quote(str(bookie_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Error | StorageReport | None:
    if response.status_code == 200:
        response_200 = StorageReport.from_dict(response.json())

        return response_200

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


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Error | StorageReport]:
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
) -> Response[Error | StorageReport]:
    """A bookie's space: its file, live ledgers, and the ledgers garbage collection found orphaned or will
    delete, each with its reason

    Args:
        bookie_id (str): the bookie's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | StorageReport]
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
) -> Error | StorageReport | None:
    """A bookie's space: its file, live ledgers, and the ledgers garbage collection found orphaned or will
    delete, each with its reason

    Args:
        bookie_id (str): the bookie's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | StorageReport
    """

    return sync_detailed(
        bookie_id=bookie_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
) -> Response[Error | StorageReport]:
    """A bookie's space: its file, live ledgers, and the ledgers garbage collection found orphaned or will
    delete, each with its reason

    Args:
        bookie_id (str): the bookie's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | StorageReport]
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
) -> Error | StorageReport | None:
    """A bookie's space: its file, live ledgers, and the ledgers garbage collection found orphaned or will
    delete, each with its reason

    Args:
        bookie_id (str): the bookie's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | StorageReport
    """

    return (
        await asyncio_detailed(
            bookie_id=bookie_id,
            client=client,
        )
    ).parsed
