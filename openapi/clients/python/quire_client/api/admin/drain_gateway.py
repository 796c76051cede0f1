from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.drained import Drained
from ...models.error import Error
from ...types import Response


def _get_kwargs(
    gateway_id: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/admin/gateways/{gateway_id}/drain".format(
            gateway_id=quote(str(gateway_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Drained | Error | None:
    if response.status_code == 200:
        response_200 = Drained.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Drained | Error]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    gateway_id: str,
    *,
    client: AuthenticatedClient,
) -> Response[Drained | Error]:
    """Drain a gateway: it takes no log any more and hands the logs it writes to the other gateways; its
    /health says 503 from then on (any gateway takes the call)

    Args:
        gateway_id (str): the gateway's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Drained | Error]
    """

    kwargs = _get_kwargs(
        gateway_id=gateway_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    gateway_id: str,
    *,
    client: AuthenticatedClient,
) -> Drained | Error | None:
    """Drain a gateway: it takes no log any more and hands the logs it writes to the other gateways; its
    /health says 503 from then on (any gateway takes the call)

    Args:
        gateway_id (str): the gateway's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Drained | Error
    """

    return sync_detailed(
        gateway_id=gateway_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    gateway_id: str,
    *,
    client: AuthenticatedClient,
) -> Response[Drained | Error]:
    """Drain a gateway: it takes no log any more and hands the logs it writes to the other gateways; its
    /health says 503 from then on (any gateway takes the call)

    Args:
        gateway_id (str): the gateway's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Drained | Error]
    """

    kwargs = _get_kwargs(
        gateway_id=gateway_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    gateway_id: str,
    *,
    client: AuthenticatedClient,
) -> Drained | Error | None:
    """Drain a gateway: it takes no log any more and hands the logs it writes to the other gateways; its
    /health says 503 from then on (any gateway takes the call)

    Args:
        gateway_id (str): the gateway's id (host:port)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Drained | Error
    """

    return (
        await asyncio_detailed(
            gateway_id=gateway_id,
            client=client,
        )
    ).parsed
