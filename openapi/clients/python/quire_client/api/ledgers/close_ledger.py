from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.ledger import Ledger
from ...types import UNSET, Response, Unset


def _get_kwargs(
    ledger_id: int,
    *,
    x_ledger_password: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(x_ledger_password, Unset):
        headers["X-Ledger-Password"] = x_ledger_password

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/ledgers/{ledger_id}/close".format(
            ledger_id=quote(str(ledger_id), safe=""),
        ),
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Error | Ledger | None:
    if response.status_code == 200:
        response_200 = Ledger.from_dict(response.json())

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

    if response.status_code == 409:
        response_409 = Error.from_dict(response.json())

        return response_409

    if response.status_code == 503:
        response_503 = Error.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Error | Ledger]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    ledger_id: int,
    *,
    client: AuthenticatedClient,
    x_ledger_password: str | Unset = UNSET,
) -> Response[Error | Ledger]:
    """Close as the writer (closing again returns the same object)

    Args:
        ledger_id (int): ledger id
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | Ledger]
    """

    kwargs = _get_kwargs(
        ledger_id=ledger_id,
        x_ledger_password=x_ledger_password,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    ledger_id: int,
    *,
    client: AuthenticatedClient,
    x_ledger_password: str | Unset = UNSET,
) -> Error | Ledger | None:
    """Close as the writer (closing again returns the same object)

    Args:
        ledger_id (int): ledger id
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | Ledger
    """

    return sync_detailed(
        ledger_id=ledger_id,
        client=client,
        x_ledger_password=x_ledger_password,
    ).parsed


async def asyncio_detailed(
    ledger_id: int,
    *,
    client: AuthenticatedClient,
    x_ledger_password: str | Unset = UNSET,
) -> Response[Error | Ledger]:
    """Close as the writer (closing again returns the same object)

    Args:
        ledger_id (int): ledger id
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | Ledger]
    """

    kwargs = _get_kwargs(
        ledger_id=ledger_id,
        x_ledger_password=x_ledger_password,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    ledger_id: int,
    *,
    client: AuthenticatedClient,
    x_ledger_password: str | Unset = UNSET,
) -> Error | Ledger | None:
    """Close as the writer (closing again returns the same object)

    Args:
        ledger_id (int): ledger id
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | Ledger
    """

    return (
        await asyncio_detailed(
            ledger_id=ledger_id,
            client=client,
            x_ledger_password=x_ledger_password,
        )
    ).parsed
