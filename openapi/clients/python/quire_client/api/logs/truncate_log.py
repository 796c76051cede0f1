from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.log_model import LogModel
from ...models.truncate_log_response_400 import TruncateLogResponse400
from ...models.truncate_log_response_401 import TruncateLogResponse401
from ...models.truncate_log_response_404 import TruncateLogResponse404
from ...models.truncate_log_response_409 import TruncateLogResponse409
from ...models.truncate_log_response_503 import TruncateLogResponse503
from ...types import UNSET, Response


def _get_kwargs(
    name: str,
    *,
    before: str,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["before"] = before

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/logs/{name}/truncate".format(
            name=quote(str(name), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    LogModel
    | TruncateLogResponse400
    | TruncateLogResponse401
    | TruncateLogResponse404
    | TruncateLogResponse409
    | TruncateLogResponse503
    | None
):
    if response.status_code == 200:
        response_200 = LogModel.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = TruncateLogResponse400.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = TruncateLogResponse401.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = TruncateLogResponse404.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = TruncateLogResponse409.from_dict(response.json())

        return response_409

    if response.status_code == 503:
        response_503 = TruncateLogResponse503.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    LogModel
    | TruncateLogResponse400
    | TruncateLogResponse401
    | TruncateLogResponse404
    | TruncateLogResponse409
    | TruncateLogResponse503
]:
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
    before: str,
) -> Response[
    LogModel
    | TruncateLogResponse400
    | TruncateLogResponse401
    | TruncateLogResponse404
    | TruncateLogResponse409
    | TruncateLogResponse503
]:
    """Remove the whole ledgers that end before a position

    Args:
        name (str):
        before (str): LID:EID

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[LogModel | TruncateLogResponse400 | TruncateLogResponse401 | TruncateLogResponse404 | TruncateLogResponse409 | TruncateLogResponse503]
    """

    kwargs = _get_kwargs(
        name=name,
        before=before,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient,
    before: str,
) -> (
    LogModel
    | TruncateLogResponse400
    | TruncateLogResponse401
    | TruncateLogResponse404
    | TruncateLogResponse409
    | TruncateLogResponse503
    | None
):
    """Remove the whole ledgers that end before a position

    Args:
        name (str):
        before (str): LID:EID

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        LogModel | TruncateLogResponse400 | TruncateLogResponse401 | TruncateLogResponse404 | TruncateLogResponse409 | TruncateLogResponse503
    """

    return sync_detailed(
        name=name,
        client=client,
        before=before,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    before: str,
) -> Response[
    LogModel
    | TruncateLogResponse400
    | TruncateLogResponse401
    | TruncateLogResponse404
    | TruncateLogResponse409
    | TruncateLogResponse503
]:
    """Remove the whole ledgers that end before a position

    Args:
        name (str):
        before (str): LID:EID

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[LogModel | TruncateLogResponse400 | TruncateLogResponse401 | TruncateLogResponse404 | TruncateLogResponse409 | TruncateLogResponse503]
    """

    kwargs = _get_kwargs(
        name=name,
        before=before,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient,
    before: str,
) -> (
    LogModel
    | TruncateLogResponse400
    | TruncateLogResponse401
    | TruncateLogResponse404
    | TruncateLogResponse409
    | TruncateLogResponse503
    | None
):
    """Remove the whole ledgers that end before a position

    Args:
        name (str):
        before (str): LID:EID

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        LogModel | TruncateLogResponse400 | TruncateLogResponse401 | TruncateLogResponse404 | TruncateLogResponse409 | TruncateLogResponse503
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            before=before,
        )
    ).parsed
