from http import HTTPStatus
from io import BytesIO
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...types import UNSET, File, Response, Unset


def _get_kwargs(
    ledger_id: int,
    entry_id: int,
    *,
    x_ledger_password: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(x_ledger_password, Unset):
        headers["X-Ledger-Password"] = x_ledger_password

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/ledgers/{ledger_id}/entries/{entry_id}".format(
            ledger_id=quote(str(ledger_id), safe=""),
            entry_id=quote(str(entry_id), safe=""),
        ),
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Error | File | None:
    if response.status_code == 200:
        response_200 = File(payload=BytesIO(response.content))

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Error | File]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    ledger_id: int,
    entry_id: int,
    *,
    client: AuthenticatedClient,
    x_ledger_password: str | Unset = UNSET,
) -> Response[Error | File]:
    """One entry's raw bytes

    Args:
        ledger_id (int): ledger id
        entry_id (int): entry id
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | File]
    """

    kwargs = _get_kwargs(
        ledger_id=ledger_id,
        entry_id=entry_id,
        x_ledger_password=x_ledger_password,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    ledger_id: int,
    entry_id: int,
    *,
    client: AuthenticatedClient,
    x_ledger_password: str | Unset = UNSET,
) -> Error | File | None:
    """One entry's raw bytes

    Args:
        ledger_id (int): ledger id
        entry_id (int): entry id
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | File
    """

    return sync_detailed(
        ledger_id=ledger_id,
        entry_id=entry_id,
        client=client,
        x_ledger_password=x_ledger_password,
    ).parsed


async def asyncio_detailed(
    ledger_id: int,
    entry_id: int,
    *,
    client: AuthenticatedClient,
    x_ledger_password: str | Unset = UNSET,
) -> Response[Error | File]:
    """One entry's raw bytes

    Args:
        ledger_id (int): ledger id
        entry_id (int): entry id
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | File]
    """

    kwargs = _get_kwargs(
        ledger_id=ledger_id,
        entry_id=entry_id,
        x_ledger_password=x_ledger_password,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    ledger_id: int,
    entry_id: int,
    *,
    client: AuthenticatedClient,
    x_ledger_password: str | Unset = UNSET,
) -> Error | File | None:
    """One entry's raw bytes

    Args:
        ledger_id (int): ledger id
        entry_id (int): entry id
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | File
    """

    return (
        await asyncio_detailed(
            ledger_id=ledger_id,
            entry_id=entry_id,
            client=client,
            x_ledger_password=x_ledger_password,
        )
    ).parsed
