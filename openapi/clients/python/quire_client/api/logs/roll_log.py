from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.roll_log_response_400 import RollLogResponse400
from ...models.roll_log_response_401 import RollLogResponse401
from ...models.roll_log_response_404 import RollLogResponse404
from ...models.roll_log_response_409 import RollLogResponse409
from ...models.roll_log_response_503 import RollLogResponse503
from ...models.rolled import Rolled
from ...types import Response


def _get_kwargs(
    name: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/logs/{name}/roll".format(
            name=quote(str(name), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    RollLogResponse400
    | RollLogResponse401
    | RollLogResponse404
    | RollLogResponse409
    | RollLogResponse503
    | Rolled
    | None
):
    if response.status_code == 200:
        response_200 = Rolled.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = RollLogResponse400.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = RollLogResponse401.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = RollLogResponse404.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = RollLogResponse409.from_dict(response.json())

        return response_409

    if response.status_code == 503:
        response_503 = RollLogResponse503.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    RollLogResponse400 | RollLogResponse401 | RollLogResponse404 | RollLogResponse409 | RollLogResponse503 | Rolled
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
) -> Response[
    RollLogResponse400 | RollLogResponse401 | RollLogResponse404 | RollLogResponse409 | RollLogResponse503 | Rolled
]:
    """Roll the log to a new ledger (create, CAS into the list, close the old one)

    Args:
        name (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[RollLogResponse400 | RollLogResponse401 | RollLogResponse404 | RollLogResponse409 | RollLogResponse503 | Rolled]
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
) -> (
    RollLogResponse400
    | RollLogResponse401
    | RollLogResponse404
    | RollLogResponse409
    | RollLogResponse503
    | Rolled
    | None
):
    """Roll the log to a new ledger (create, CAS into the list, close the old one)

    Args:
        name (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        RollLogResponse400 | RollLogResponse401 | RollLogResponse404 | RollLogResponse409 | RollLogResponse503 | Rolled
    """

    return sync_detailed(
        name=name,
        client=client,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
) -> Response[
    RollLogResponse400 | RollLogResponse401 | RollLogResponse404 | RollLogResponse409 | RollLogResponse503 | Rolled
]:
    """Roll the log to a new ledger (create, CAS into the list, close the old one)

    Args:
        name (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[RollLogResponse400 | RollLogResponse401 | RollLogResponse404 | RollLogResponse409 | RollLogResponse503 | Rolled]
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
) -> (
    RollLogResponse400
    | RollLogResponse401
    | RollLogResponse404
    | RollLogResponse409
    | RollLogResponse503
    | Rolled
    | None
):
    """Roll the log to a new ledger (create, CAS into the list, close the old one)

    Args:
        name (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        RollLogResponse400 | RollLogResponse401 | RollLogResponse404 | RollLogResponse409 | RollLogResponse503 | Rolled
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
        )
    ).parsed
