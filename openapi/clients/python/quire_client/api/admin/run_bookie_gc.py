from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.gc_pass import GcPass
from ...types import UNSET, Response, Unset


def _get_kwargs(
    bookie_id: str,
    *,
    dry_run: bool | Unset = False,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["dry_run"] = dry_run

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/admin/bookies/{bookie_id}/gc".format(
            bookie_id=quote(str(bookie_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Error | GcPass | None:
    if response.status_code == 200:
        response_200 = GcPass.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Error | GcPass]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
    dry_run: bool | Unset = False,
) -> Response[Error | GcPass]:
    """Run a garbage-collection pass on a bookie now (dry_run: only say what it would free, deleting
    nothing and starting no ledger's grace)

    Args:
        bookie_id (str): the bookie's id (host:port)
        dry_run (bool | Unset): only answer what would be freed Default: False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | GcPass]
    """

    kwargs = _get_kwargs(
        bookie_id=bookie_id,
        dry_run=dry_run,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
    dry_run: bool | Unset = False,
) -> Error | GcPass | None:
    """Run a garbage-collection pass on a bookie now (dry_run: only say what it would free, deleting
    nothing and starting no ledger's grace)

    Args:
        bookie_id (str): the bookie's id (host:port)
        dry_run (bool | Unset): only answer what would be freed Default: False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | GcPass
    """

    return sync_detailed(
        bookie_id=bookie_id,
        client=client,
        dry_run=dry_run,
    ).parsed


async def asyncio_detailed(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
    dry_run: bool | Unset = False,
) -> Response[Error | GcPass]:
    """Run a garbage-collection pass on a bookie now (dry_run: only say what it would free, deleting
    nothing and starting no ledger's grace)

    Args:
        bookie_id (str): the bookie's id (host:port)
        dry_run (bool | Unset): only answer what would be freed Default: False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | GcPass]
    """

    kwargs = _get_kwargs(
        bookie_id=bookie_id,
        dry_run=dry_run,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
    dry_run: bool | Unset = False,
) -> Error | GcPass | None:
    """Run a garbage-collection pass on a bookie now (dry_run: only say what it would free, deleting
    nothing and starting no ledger's grace)

    Args:
        bookie_id (str): the bookie's id (host:port)
        dry_run (bool | Unset): only answer what would be freed Default: False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | GcPass
    """

    return (
        await asyncio_detailed(
            bookie_id=bookie_id,
            client=client,
            dry_run=dry_run,
        )
    ).parsed
