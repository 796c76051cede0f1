from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.log_model import LogModel
from ...types import UNSET, Response, Unset


def _get_kwargs(
    name: str,
    *,
    usage: bool | Unset = False,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["usage"] = usage

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/logs/{name}".format(
            name=quote(str(name), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Error | LogModel | None:
    if response.status_code == 200:
        response_200 = LogModel.from_dict(response.json())

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
    usage: bool | Unset = False,
) -> Response[Error | LogModel]:
    """A log

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        usage (bool | Unset): add `usage`: its ledgers, records and bytes (a metadata look-up per
            ledger, closed ones cached) Default: False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | LogModel]
    """

    kwargs = _get_kwargs(
        name=name,
        usage=usage,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient,
    usage: bool | Unset = False,
) -> Error | LogModel | None:
    """A log

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        usage (bool | Unset): add `usage`: its ledgers, records and bytes (a metadata look-up per
            ledger, closed ones cached) Default: False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | LogModel
    """

    return sync_detailed(
        name=name,
        client=client,
        usage=usage,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    usage: bool | Unset = False,
) -> Response[Error | LogModel]:
    """A log

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        usage (bool | Unset): add `usage`: its ledgers, records and bytes (a metadata look-up per
            ledger, closed ones cached) Default: False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | LogModel]
    """

    kwargs = _get_kwargs(
        name=name,
        usage=usage,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient,
    usage: bool | Unset = False,
) -> Error | LogModel | None:
    """A log

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        usage (bool | Unset): add `usage`: its ledgers, records and bytes (a metadata look-up per
            ledger, closed ones cached) Default: False.

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
            usage=usage,
        )
    ).parsed
