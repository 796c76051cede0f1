from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.ack_cursor import AckCursor
from ...models.cursor_acked import CursorAcked
from ...models.error import Error
from ...types import Response


def _get_kwargs(
    name: str,
    cursor: str,
    *,
    body: AckCursor,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/logs/{name}/cursors/{cursor}/ack".format(
            name=quote(str(name), safe=""),
            cursor=quote(str(cursor), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> CursorAcked | Error | None:
    if response.status_code == 200:
        response_200 = CursorAcked.from_dict(response.json())

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

    if response.status_code == 409:
        response_409 = Error.from_dict(response.json())

        return response_409

    if response.status_code == 503:
        response_503 = Error.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[CursorAcked | Error]:
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
    body: AckCursor,
) -> Response[CursorAcked | Error]:
    """Move the cursor forward to a position (an older one changes nothing)

     Answered once the position is stored in ZooKeeper; acks to one cursor are merged (the highest wins)
    and written at most every --cursor-flush-ms per gateway. moved: false when the position was at or
    before the cursor's.

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        cursor (str): 1-200 characters of A-Za-z0-9._-
        body (AckCursor): Body of POST /v1/logs/{name}/cursors/{cursor}/ack.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CursorAcked | Error]
    """

    kwargs = _get_kwargs(
        name=name,
        cursor=cursor,
        body=body,
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
    body: AckCursor,
) -> CursorAcked | Error | None:
    """Move the cursor forward to a position (an older one changes nothing)

     Answered once the position is stored in ZooKeeper; acks to one cursor are merged (the highest wins)
    and written at most every --cursor-flush-ms per gateway. moved: false when the position was at or
    before the cursor's.

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        cursor (str): 1-200 characters of A-Za-z0-9._-
        body (AckCursor): Body of POST /v1/logs/{name}/cursors/{cursor}/ack.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CursorAcked | Error
    """

    return sync_detailed(
        name=name,
        cursor=cursor,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    name: str,
    cursor: str,
    *,
    client: AuthenticatedClient,
    body: AckCursor,
) -> Response[CursorAcked | Error]:
    """Move the cursor forward to a position (an older one changes nothing)

     Answered once the position is stored in ZooKeeper; acks to one cursor are merged (the highest wins)
    and written at most every --cursor-flush-ms per gateway. moved: false when the position was at or
    before the cursor's.

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        cursor (str): 1-200 characters of A-Za-z0-9._-
        body (AckCursor): Body of POST /v1/logs/{name}/cursors/{cursor}/ack.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CursorAcked | Error]
    """

    kwargs = _get_kwargs(
        name=name,
        cursor=cursor,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    cursor: str,
    *,
    client: AuthenticatedClient,
    body: AckCursor,
) -> CursorAcked | Error | None:
    """Move the cursor forward to a position (an older one changes nothing)

     Answered once the position is stored in ZooKeeper; acks to one cursor are merged (the highest wins)
    and written at most every --cursor-flush-ms per gateway. moved: false when the position was at or
    before the cursor's.

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        cursor (str): 1-200 characters of A-Za-z0-9._-
        body (AckCursor): Body of POST /v1/logs/{name}/cursors/{cursor}/ack.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CursorAcked | Error
    """

    return (
        await asyncio_detailed(
            name=name,
            cursor=cursor,
            client=client,
            body=body,
        )
    ).parsed
