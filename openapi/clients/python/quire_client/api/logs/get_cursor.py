from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.cursor_model import CursorModel
from ...models.error import Error
from ...types import Response


def _get_kwargs(
    name: str,
    cursor: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/logs/{name}/cursors/{cursor}".format(
            name=quote(str(name), safe=""),
            cursor=quote(str(cursor), safe=""),
        ),
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> CursorModel | Error | None:
    if response.status_code == 200:
        response_200 = CursorModel.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[CursorModel | Error]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    name: str,
    cursor: str,
    *,
    client: AuthenticatedClient,
) -> Response[CursorModel | Error]:
    """A durable cursor with its lag

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        cursor (str): 1-200 characters of A-Za-z0-9._-

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CursorModel | Error]
    """

    kwargs = _get_kwargs(
        name=name,
        cursor=cursor,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    cursor: str,
    *,
    client: AuthenticatedClient,
) -> CursorModel | Error | None:
    """A durable cursor with its lag

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        cursor (str): 1-200 characters of A-Za-z0-9._-

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CursorModel | Error
    """

    return sync_detailed(
        name=name,
        cursor=cursor,
        client=client,
    ).parsed


async def asyncio_detailed(
    name: str,
    cursor: str,
    *,
    client: AuthenticatedClient,
) -> Response[CursorModel | Error]:
    """A durable cursor with its lag

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        cursor (str): 1-200 characters of A-Za-z0-9._-

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CursorModel | Error]
    """

    kwargs = _get_kwargs(
        name=name,
        cursor=cursor,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    cursor: str,
    *,
    client: AuthenticatedClient,
) -> CursorModel | Error | None:
    """A durable cursor with its lag

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        cursor (str): 1-200 characters of A-Za-z0-9._-

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CursorModel | Error
    """

    return (
        await asyncio_detailed(
            name=name,
            cursor=cursor,
            client=client,
        )
    ).parsed
