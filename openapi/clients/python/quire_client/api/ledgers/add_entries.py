from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.add_entries_json_body import AddEntriesJsonBody
from ...models.add_result import AddResult
from ...models.batch_add_result import BatchAddResult
from ...models.error import Error
from ...types import UNSET, File, Response, Unset


def _get_kwargs(
    ledger_id: int,
    *,
    body: AddEntriesJsonBody | File | Unset = UNSET,
    x_ledger_password: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(x_ledger_password, Unset):
        headers["X-Ledger-Password"] = x_ledger_password

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/ledgers/{ledger_id}/entries".format(
            ledger_id=quote(str(ledger_id), safe=""),
        ),
    }

    if isinstance(body, AddEntriesJsonBody):
        if not isinstance(body, Unset):
            _kwargs["json"] = body.to_dict()

        headers["Content-Type"] = "application/json"
    if isinstance(body, File):
        if not isinstance(body, Unset):
            _kwargs["content"] = body.payload
        headers["Content-Type"] = "application/octet-stream"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AddResult | BatchAddResult | Error | None:
    if response.status_code == 200:

        def _parse_response_200(data: object) -> AddResult | BatchAddResult:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                response_200_type_0 = AddResult.from_dict(data)

                return response_200_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            response_200_type_1 = BatchAddResult.from_dict(data)

            return response_200_type_1

        response_200 = _parse_response_200(response.json())

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

    if response.status_code == 413:
        response_413 = Error.from_dict(response.json())

        return response_413

    if response.status_code == 503:
        response_503 = Error.from_dict(response.json())

        return response_503

    if response.status_code == 504:
        response_504 = Error.from_dict(response.json())

        return response_504

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[AddResult | BatchAddResult | Error]:
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
    body: AddEntriesJsonBody | File | Unset = UNSET,
    x_ledger_password: str | Unset = UNSET,
) -> Response[AddResult | BatchAddResult | Error]:
    """Add one entry (raw body) or a batch (JSON)

    Args:
        ledger_id (int): ledger id
        x_ledger_password (str | Unset): the ledger's password, when it was created with one
        body (AddEntriesJsonBody | Unset):
        body (File | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AddResult | BatchAddResult | Error]
    """

    kwargs = _get_kwargs(
        ledger_id=ledger_id,
        body=body,
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
    body: AddEntriesJsonBody | File | Unset = UNSET,
    x_ledger_password: str | Unset = UNSET,
) -> AddResult | BatchAddResult | Error | None:
    """Add one entry (raw body) or a batch (JSON)

    Args:
        ledger_id (int): ledger id
        x_ledger_password (str | Unset): the ledger's password, when it was created with one
        body (AddEntriesJsonBody | Unset):
        body (File | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AddResult | BatchAddResult | Error
    """

    return sync_detailed(
        ledger_id=ledger_id,
        client=client,
        body=body,
        x_ledger_password=x_ledger_password,
    ).parsed


async def asyncio_detailed(
    ledger_id: int,
    *,
    client: AuthenticatedClient,
    body: AddEntriesJsonBody | File | Unset = UNSET,
    x_ledger_password: str | Unset = UNSET,
) -> Response[AddResult | BatchAddResult | Error]:
    """Add one entry (raw body) or a batch (JSON)

    Args:
        ledger_id (int): ledger id
        x_ledger_password (str | Unset): the ledger's password, when it was created with one
        body (AddEntriesJsonBody | Unset):
        body (File | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AddResult | BatchAddResult | Error]
    """

    kwargs = _get_kwargs(
        ledger_id=ledger_id,
        body=body,
        x_ledger_password=x_ledger_password,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    ledger_id: int,
    *,
    client: AuthenticatedClient,
    body: AddEntriesJsonBody | File | Unset = UNSET,
    x_ledger_password: str | Unset = UNSET,
) -> AddResult | BatchAddResult | Error | None:
    """Add one entry (raw body) or a batch (JSON)

    Args:
        ledger_id (int): ledger id
        x_ledger_password (str | Unset): the ledger's password, when it was created with one
        body (AddEntriesJsonBody | Unset):
        body (File | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AddResult | BatchAddResult | Error
    """

    return (
        await asyncio_detailed(
            ledger_id=ledger_id,
            client=client,
            body=body,
            x_ledger_password=x_ledger_password,
        )
    ).parsed
