import datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.record_page import RecordPage
from ...types import UNSET, Response, Unset


def _get_kwargs(
    name: str,
    *,
    from_: None | str | Unset = UNSET,
    limit: int | Unset = 1000,
    wait_ms: int | Unset = 0,
    from_time: datetime.datetime | str | Unset = UNSET,
    cursor: None | str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_from_: None | str | Unset
    if isinstance(from_, Unset):
        json_from_ = UNSET
    else:
        json_from_ = from_
    params["from"] = json_from_

    params["limit"] = limit

    params["wait_ms"] = wait_ms

    json_from_time: str | Unset
    if isinstance(from_time, Unset):
        json_from_time = UNSET
    elif isinstance(from_time, datetime.datetime):
        json_from_time = from_time.isoformat()
    else:
        json_from_time = from_time
    params["from_time"] = json_from_time

    json_cursor: None | str | Unset
    if isinstance(cursor, Unset):
        json_cursor = UNSET
    else:
        json_cursor = cursor
    params["cursor"] = json_cursor

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/logs/{name}/records".format(
            name=quote(str(name), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Error | RecordPage | None:
    if response.status_code == 200:
        response_200 = RecordPage.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Error | RecordPage]:
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
    from_: None | str | Unset = UNSET,
    limit: int | Unset = 1000,
    wait_ms: int | Unset = 0,
    from_time: datetime.datetime | str | Unset = UNSET,
    cursor: None | str | Unset = UNSET,
) -> Response[Error | RecordPage]:
    """Read records in log order from a position (never fences; tail with wait_ms)

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        from_ (None | str | Unset): LID:EID, each a decimal id of at most 2^63-1
        limit (int | Unset): clamped to 1000 Default: 1000.
        wait_ms (int | Unset): clamped to 30000 Default: 0.
        from_time (datetime.datetime | str | Unset): start at the first record stamped at or after
            this time: ms since the Unix epoch or RFC 3339 (2026-11-29T10:00:00Z); not with `from`
        cursor (None | str | Unset): start just after this durable cursor's position (its first
            record when it has none); not with `from` or `from_time`. The read does not move it: ack
            what was processed (POST .../cursors/{cursor}/ack)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | RecordPage]
    """

    kwargs = _get_kwargs(
        name=name,
        from_=from_,
        limit=limit,
        wait_ms=wait_ms,
        from_time=from_time,
        cursor=cursor,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient,
    from_: None | str | Unset = UNSET,
    limit: int | Unset = 1000,
    wait_ms: int | Unset = 0,
    from_time: datetime.datetime | str | Unset = UNSET,
    cursor: None | str | Unset = UNSET,
) -> Error | RecordPage | None:
    """Read records in log order from a position (never fences; tail with wait_ms)

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        from_ (None | str | Unset): LID:EID, each a decimal id of at most 2^63-1
        limit (int | Unset): clamped to 1000 Default: 1000.
        wait_ms (int | Unset): clamped to 30000 Default: 0.
        from_time (datetime.datetime | str | Unset): start at the first record stamped at or after
            this time: ms since the Unix epoch or RFC 3339 (2026-11-29T10:00:00Z); not with `from`
        cursor (None | str | Unset): start just after this durable cursor's position (its first
            record when it has none); not with `from` or `from_time`. The read does not move it: ack
            what was processed (POST .../cursors/{cursor}/ack)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | RecordPage
    """

    return sync_detailed(
        name=name,
        client=client,
        from_=from_,
        limit=limit,
        wait_ms=wait_ms,
        from_time=from_time,
        cursor=cursor,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    from_: None | str | Unset = UNSET,
    limit: int | Unset = 1000,
    wait_ms: int | Unset = 0,
    from_time: datetime.datetime | str | Unset = UNSET,
    cursor: None | str | Unset = UNSET,
) -> Response[Error | RecordPage]:
    """Read records in log order from a position (never fences; tail with wait_ms)

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        from_ (None | str | Unset): LID:EID, each a decimal id of at most 2^63-1
        limit (int | Unset): clamped to 1000 Default: 1000.
        wait_ms (int | Unset): clamped to 30000 Default: 0.
        from_time (datetime.datetime | str | Unset): start at the first record stamped at or after
            this time: ms since the Unix epoch or RFC 3339 (2026-11-29T10:00:00Z); not with `from`
        cursor (None | str | Unset): start just after this durable cursor's position (its first
            record when it has none); not with `from` or `from_time`. The read does not move it: ack
            what was processed (POST .../cursors/{cursor}/ack)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | RecordPage]
    """

    kwargs = _get_kwargs(
        name=name,
        from_=from_,
        limit=limit,
        wait_ms=wait_ms,
        from_time=from_time,
        cursor=cursor,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient,
    from_: None | str | Unset = UNSET,
    limit: int | Unset = 1000,
    wait_ms: int | Unset = 0,
    from_time: datetime.datetime | str | Unset = UNSET,
    cursor: None | str | Unset = UNSET,
) -> Error | RecordPage | None:
    """Read records in log order from a position (never fences; tail with wait_ms)

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        from_ (None | str | Unset): LID:EID, each a decimal id of at most 2^63-1
        limit (int | Unset): clamped to 1000 Default: 1000.
        wait_ms (int | Unset): clamped to 30000 Default: 0.
        from_time (datetime.datetime | str | Unset): start at the first record stamped at or after
            this time: ms since the Unix epoch or RFC 3339 (2026-11-29T10:00:00Z); not with `from`
        cursor (None | str | Unset): start just after this durable cursor's position (its first
            record when it has none); not with `from` or `from_time`. The read does not move it: ack
            what was processed (POST .../cursors/{cursor}/ack)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | RecordPage
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            from_=from_,
            limit=limit,
            wait_ms=wait_ms,
            from_time=from_time,
            cursor=cursor,
        )
    ).parsed
