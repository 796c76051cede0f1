from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.create_log import CreateLog
from ...models.error import Error
from ...models.log_model import LogModel
from ...types import UNSET, Response, Unset


def _get_kwargs(
    name: str,
    *,
    body: CreateLog | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/v1/logs/{name}".format(
            name=quote(str(name), safe=""),
        ),
    }

    if not isinstance(body, Unset):
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Error | LogModel | None:
    if response.status_code == 200:
        response_200 = LogModel.from_dict(response.json())

        return response_200

    if response.status_code == 201:
        response_201 = LogModel.from_dict(response.json())

        return response_201

    if response.status_code == 400:
        response_400 = Error.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Error.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Error.from_dict(response.json())

        return response_403

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Error | LogModel]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: CreateLog | Unset = UNSET,
) -> Response[Error | LogModel]:
    """Create a log (201), or answer the existing one (200)

     Log names: 1-200 characters of A-Za-z0-9._-. An optional JSON body sets the ensemble of the log's
    ledgers (default 3/2/2) and its retention policy (default none).

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        body (CreateLog | Unset): Optional body of PUT /v1/logs/{name}: the ensemble of the log's
            ledgers.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | LogModel]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient,
    body: CreateLog | Unset = UNSET,
) -> Error | LogModel | None:
    """Create a log (201), or answer the existing one (200)

     Log names: 1-200 characters of A-Za-z0-9._-. An optional JSON body sets the ensemble of the log's
    ledgers (default 3/2/2) and its retention policy (default none).

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        body (CreateLog | Unset): Optional body of PUT /v1/logs/{name}: the ensemble of the log's
            ledgers.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | LogModel
    """

    return sync_detailed(
        name=name,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: CreateLog | Unset = UNSET,
) -> Response[Error | LogModel]:
    """Create a log (201), or answer the existing one (200)

     Log names: 1-200 characters of A-Za-z0-9._-. An optional JSON body sets the ensemble of the log's
    ledgers (default 3/2/2) and its retention policy (default none).

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        body (CreateLog | Unset): Optional body of PUT /v1/logs/{name}: the ensemble of the log's
            ledgers.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | LogModel]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient,
    body: CreateLog | Unset = UNSET,
) -> Error | LogModel | None:
    """Create a log (201), or answer the existing one (200)

     Log names: 1-200 characters of A-Za-z0-9._-. An optional JSON body sets the ensemble of the log's
    ledgers (default 3/2/2) and its retention policy (default none).

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        body (CreateLog | Unset): Optional body of PUT /v1/logs/{name}: the ensemble of the log's
            ledgers.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | LogModel
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            body=body,
        )
    ).parsed
