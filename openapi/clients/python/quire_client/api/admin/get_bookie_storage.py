from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.storage_report import StorageReport
from ...types import UNSET, Response, Unset


def _get_kwargs(
    bookie_id: str,
    *,
    by_log: bool | Unset = False,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["by_log"] = by_log

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/admin/bookies/{bookie_id}/storage".format(
            bookie_id=quote(str(bookie_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Error | StorageReport | None:
    if response.status_code == 200:
        response_200 = StorageReport.from_dict(response.json())

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


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Error | StorageReport]:
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
    by_log: bool | Unset = False,
) -> Response[Error | StorageReport]:
    """A bookie's space: its file, live ledgers, and the ledgers garbage collection found orphaned or will
    delete, each with its reason; with by_log=true, its bytes by log

     With `by_log=true` the answer adds `by_log`: every ledger the bookie stores, counted by the log its
    metadata names (the largest 100 logs listed), by plain ledgers, and by ledgers whose metadata is
    gone. It pages through the bookie's ledgers and reads their metadata from ZooKeeper, so it stops
    after 100,000 ledgers or 20 s and then says `truncated`.

    Args:
        bookie_id (str): the bookie's id (host:port)
        by_log (bool | Unset): also count the bookie's bytes by log (costly: see above) Default:
            False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | StorageReport]
    """

    kwargs = _get_kwargs(
        bookie_id=bookie_id,
        by_log=by_log,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
    by_log: bool | Unset = False,
) -> Error | StorageReport | None:
    """A bookie's space: its file, live ledgers, and the ledgers garbage collection found orphaned or will
    delete, each with its reason; with by_log=true, its bytes by log

     With `by_log=true` the answer adds `by_log`: every ledger the bookie stores, counted by the log its
    metadata names (the largest 100 logs listed), by plain ledgers, and by ledgers whose metadata is
    gone. It pages through the bookie's ledgers and reads their metadata from ZooKeeper, so it stops
    after 100,000 ledgers or 20 s and then says `truncated`.

    Args:
        bookie_id (str): the bookie's id (host:port)
        by_log (bool | Unset): also count the bookie's bytes by log (costly: see above) Default:
            False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | StorageReport
    """

    return sync_detailed(
        bookie_id=bookie_id,
        client=client,
        by_log=by_log,
    ).parsed


async def asyncio_detailed(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
    by_log: bool | Unset = False,
) -> Response[Error | StorageReport]:
    """A bookie's space: its file, live ledgers, and the ledgers garbage collection found orphaned or will
    delete, each with its reason; with by_log=true, its bytes by log

     With `by_log=true` the answer adds `by_log`: every ledger the bookie stores, counted by the log its
    metadata names (the largest 100 logs listed), by plain ledgers, and by ledgers whose metadata is
    gone. It pages through the bookie's ledgers and reads their metadata from ZooKeeper, so it stops
    after 100,000 ledgers or 20 s and then says `truncated`.

    Args:
        bookie_id (str): the bookie's id (host:port)
        by_log (bool | Unset): also count the bookie's bytes by log (costly: see above) Default:
            False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | StorageReport]
    """

    kwargs = _get_kwargs(
        bookie_id=bookie_id,
        by_log=by_log,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    bookie_id: str,
    *,
    client: AuthenticatedClient,
    by_log: bool | Unset = False,
) -> Error | StorageReport | None:
    """A bookie's space: its file, live ledgers, and the ledgers garbage collection found orphaned or will
    delete, each with its reason; with by_log=true, its bytes by log

     With `by_log=true` the answer adds `by_log`: every ledger the bookie stores, counted by the log its
    metadata names (the largest 100 logs listed), by plain ledgers, and by ledgers whose metadata is
    gone. It pages through the bookie's ledgers and reads their metadata from ZooKeeper, so it stops
    after 100,000 ledgers or 20 s and then says `truncated`.

    Args:
        bookie_id (str): the bookie's id (host:port)
        by_log (bool | Unset): also count the bookie's bytes by log (costly: see above) Default:
            False.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | StorageReport
    """

    return (
        await asyncio_detailed(
            bookie_id=bookie_id,
            client=client,
            by_log=by_log,
        )
    ).parsed
