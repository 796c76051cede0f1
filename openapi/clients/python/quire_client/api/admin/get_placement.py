from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.placement_report import PlacementReport
from ...types import Response


def _get_kwargs() -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/admin/placement",
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Error | PlacementReport | None:
    if response.status_code == 200:
        response_200 = PlacementReport.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = Error.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Error.from_dict(response.json())

        return response_403

    if response.status_code == 503:
        response_503 = Error.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Error | PlacementReport]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[Error | PlacementReport]:
    """Ledgers whose write quorums span too few racks, as the auditor last found them

     The elected auditor's placement report of its last complete check (docs/operations.md "Racks"):
    bookies per rack, how many ledgers break the rack policy, how many a placement move can fix now
    (they are marked, and the replication workers move them), and the first 100 with their fragments.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | PlacementReport]
    """

    kwargs = _get_kwargs()

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
) -> Error | PlacementReport | None:
    """Ledgers whose write quorums span too few racks, as the auditor last found them

     The elected auditor's placement report of its last complete check (docs/operations.md "Racks"):
    bookies per rack, how many ledgers break the rack policy, how many a placement move can fix now
    (they are marked, and the replication workers move them), and the first 100 with their fragments.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | PlacementReport
    """

    return sync_detailed(
        client=client,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[Error | PlacementReport]:
    """Ledgers whose write quorums span too few racks, as the auditor last found them

     The elected auditor's placement report of its last complete check (docs/operations.md "Racks"):
    bookies per rack, how many ledgers break the rack policy, how many a placement move can fix now
    (they are marked, and the replication workers move them), and the first 100 with their fragments.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | PlacementReport]
    """

    kwargs = _get_kwargs()

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
) -> Error | PlacementReport | None:
    """Ledgers whose write quorums span too few racks, as the auditor last found them

     The elected auditor's placement report of its last complete check (docs/operations.md "Racks"):
    bookies per rack, how many ledgers break the rack policy, how many a placement move can fix now
    (they are marked, and the replication workers move them), and the first 100 with their fragments.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | PlacementReport
    """

    return (
        await asyncio_detailed(
            client=client,
        )
    ).parsed
