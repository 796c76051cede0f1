from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.entry_page import EntryPage
from ...models.error import Error
from ...types import UNSET, Response, Unset


def _get_kwargs(
    ledger_id: int,
    *,
    from_: int | None | Unset = UNSET,
    to: int | None | Unset = UNSET,
    x_ledger_password: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(x_ledger_password, Unset):
        headers["X-Ledger-Password"] = x_ledger_password

    params: dict[str, Any] = {}

    json_from_: int | None | Unset
    if isinstance(from_, Unset):
        json_from_ = UNSET
    else:
        json_from_ = from_
    params["from"] = json_from_

    json_to: int | None | Unset
    if isinstance(to, Unset):
        json_to = UNSET
    else:
        json_to = to
    params["to"] = json_to

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/ledgers/{ledger_id}/entries".format(
            ledger_id=quote(str(ledger_id), safe=""),
        ),
        "params": params,
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> EntryPage | Error | None:
    if response.status_code == 200:
        response_200 = EntryPage.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[EntryPage | Error]:
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
    from_: int | None | Unset = UNSET,
    to: int | None | Unset = UNSET,
    x_ledger_password: str | Unset = UNSET,
) -> Response[EntryPage | Error]:
    """Read a range (paged; NDJSON stream with Accept: application/x-ndjson)

    Args:
        ledger_id (int): ledger id
        from_ (int | None | Unset): first entry id (default 0)
        to (int | None | Unset): last entry id, inclusive (default: the LAC, or the last entry of
            a closed ledger); below `from`: 400 invalid_argument
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[EntryPage | Error]
    """

    kwargs = _get_kwargs(
        ledger_id=ledger_id,
        from_=from_,
        to=to,
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
    from_: int | None | Unset = UNSET,
    to: int | None | Unset = UNSET,
    x_ledger_password: str | Unset = UNSET,
) -> EntryPage | Error | None:
    """Read a range (paged; NDJSON stream with Accept: application/x-ndjson)

    Args:
        ledger_id (int): ledger id
        from_ (int | None | Unset): first entry id (default 0)
        to (int | None | Unset): last entry id, inclusive (default: the LAC, or the last entry of
            a closed ledger); below `from`: 400 invalid_argument
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        EntryPage | Error
    """

    return sync_detailed(
        ledger_id=ledger_id,
        client=client,
        from_=from_,
        to=to,
        x_ledger_password=x_ledger_password,
    ).parsed


async def asyncio_detailed(
    ledger_id: int,
    *,
    client: AuthenticatedClient,
    from_: int | None | Unset = UNSET,
    to: int | None | Unset = UNSET,
    x_ledger_password: str | Unset = UNSET,
) -> Response[EntryPage | Error]:
    """Read a range (paged; NDJSON stream with Accept: application/x-ndjson)

    Args:
        ledger_id (int): ledger id
        from_ (int | None | Unset): first entry id (default 0)
        to (int | None | Unset): last entry id, inclusive (default: the LAC, or the last entry of
            a closed ledger); below `from`: 400 invalid_argument
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[EntryPage | Error]
    """

    kwargs = _get_kwargs(
        ledger_id=ledger_id,
        from_=from_,
        to=to,
        x_ledger_password=x_ledger_password,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    ledger_id: int,
    *,
    client: AuthenticatedClient,
    from_: int | None | Unset = UNSET,
    to: int | None | Unset = UNSET,
    x_ledger_password: str | Unset = UNSET,
) -> EntryPage | Error | None:
    """Read a range (paged; NDJSON stream with Accept: application/x-ndjson)

    Args:
        ledger_id (int): ledger id
        from_ (int | None | Unset): first entry id (default 0)
        to (int | None | Unset): last entry id, inclusive (default: the LAC, or the last entry of
            a closed ledger); below `from`: 400 invalid_argument
        x_ledger_password (str | Unset): the ledger's password, when it was created with one

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        EntryPage | Error
    """

    return (
        await asyncio_detailed(
            ledger_id=ledger_id,
            client=client,
            from_=from_,
            to=to,
            x_ledger_password=x_ledger_password,
        )
    ).parsed
