from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.lac import Lac
from ...types import UNSET, Response, Unset


def _get_kwargs(
    ledger_id: int,
    *,
    after: int | None | Unset = UNSET,
    wait_ms: int | Unset = 0,
    x_ledger_password: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(x_ledger_password, Unset):
        headers["X-Ledger-Password"] = x_ledger_password

    params: dict[str, Any] = {}

    json_after: int | None | Unset
    if isinstance(after, Unset):
        json_after = UNSET
    else:
        json_after = after
    params["after"] = json_after

    params["wait_ms"] = wait_ms

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/ledgers/{ledger_id}/lac".format(
            ledger_id=quote(str(ledger_id), safe=""),
        ),
        "params": params,
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Error | Lac | None:
    if response.status_code == 200:
        response_200 = Lac.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Error | Lac]:
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
    after: int | None | Unset = UNSET,
    wait_ms: int | Unset = 0,
    x_ledger_password: str | Unset = UNSET,
) -> Response[Error | Lac]:
    """Last add confirmed, optionally long-polling for a newer one (never fences)

    Args:
        ledger_id (int): ledger id
        after (int | None | Unset):
        wait_ms (int | Unset): clamped to 30000 Default: 0.
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | Lac]
    """

    kwargs = _get_kwargs(
        ledger_id=ledger_id,
        after=after,
        wait_ms=wait_ms,
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
    after: int | None | Unset = UNSET,
    wait_ms: int | Unset = 0,
    x_ledger_password: str | Unset = UNSET,
) -> Error | Lac | None:
    """Last add confirmed, optionally long-polling for a newer one (never fences)

    Args:
        ledger_id (int): ledger id
        after (int | None | Unset):
        wait_ms (int | Unset): clamped to 30000 Default: 0.
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | Lac
    """

    return sync_detailed(
        ledger_id=ledger_id,
        client=client,
        after=after,
        wait_ms=wait_ms,
        x_ledger_password=x_ledger_password,
    ).parsed


async def asyncio_detailed(
    ledger_id: int,
    *,
    client: AuthenticatedClient,
    after: int | None | Unset = UNSET,
    wait_ms: int | Unset = 0,
    x_ledger_password: str | Unset = UNSET,
) -> Response[Error | Lac]:
    """Last add confirmed, optionally long-polling for a newer one (never fences)

    Args:
        ledger_id (int): ledger id
        after (int | None | Unset):
        wait_ms (int | Unset): clamped to 30000 Default: 0.
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | Lac]
    """

    kwargs = _get_kwargs(
        ledger_id=ledger_id,
        after=after,
        wait_ms=wait_ms,
        x_ledger_password=x_ledger_password,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    ledger_id: int,
    *,
    client: AuthenticatedClient,
    after: int | None | Unset = UNSET,
    wait_ms: int | Unset = 0,
    x_ledger_password: str | Unset = UNSET,
) -> Error | Lac | None:
    """Last add confirmed, optionally long-polling for a newer one (never fences)

    Args:
        ledger_id (int): ledger id
        after (int | None | Unset):
        wait_ms (int | Unset): clamped to 30000 Default: 0.
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | Lac
    """

    return (
        await asyncio_detailed(
            ledger_id=ledger_id,
            client=client,
            after=after,
            wait_ms=wait_ms,
            x_ledger_password=x_ledger_password,
        )
    ).parsed
