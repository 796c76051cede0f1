from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.get_log_response_400 import GetLogResponse400
from ...models.get_log_response_401 import GetLogResponse401
from ...models.get_log_response_404 import GetLogResponse404
from ...models.log_model import LogModel
from ...types import Response


def _get_kwargs(
    name: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/logs/{name}".format(
            name=quote(str(name), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> GetLogResponse400 | GetLogResponse401 | GetLogResponse404 | LogModel | None:
    if response.status_code == 200:
        response_200 = LogModel.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = GetLogResponse400.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = GetLogResponse401.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = GetLogResponse404.from_dict(response.json())

        return response_404

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[GetLogResponse400 | GetLogResponse401 | GetLogResponse404 | LogModel]:
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
) -> Response[GetLogResponse400 | GetLogResponse401 | GetLogResponse404 | LogModel]:
    """A log

    Args:
        name (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GetLogResponse400 | GetLogResponse401 | GetLogResponse404 | LogModel]
    """

    kwargs = _get_kwargs(
        name=name,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient,
) -> GetLogResponse400 | GetLogResponse401 | GetLogResponse404 | LogModel | None:
    """A log

    Args:
        name (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GetLogResponse400 | GetLogResponse401 | GetLogResponse404 | LogModel
    """

    return sync_detailed(
        name=name,
        client=client,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
) -> Response[GetLogResponse400 | GetLogResponse401 | GetLogResponse404 | LogModel]:
    """A log

    Args:
        name (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GetLogResponse400 | GetLogResponse401 | GetLogResponse404 | LogModel]
    """

    kwargs = _get_kwargs(
        name=name,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient,
) -> GetLogResponse400 | GetLogResponse401 | GetLogResponse404 | LogModel | None:
    """A log

    Args:
        name (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GetLogResponse400 | GetLogResponse401 | GetLogResponse404 | LogModel
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
        )
    ).parsed
