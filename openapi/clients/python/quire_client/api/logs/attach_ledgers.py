from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.attach_ledgers import AttachLedgers
from ...models.attach_result import AttachResult
from ...models.error import Error
from ...types import Response


def _get_kwargs(
    name: str,
    *,
    body: AttachLedgers,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/logs/{name}/ledgers".format(
            name=quote(str(name), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> AttachResult | Error | None:
    if response.status_code == 200:
        response_200 = AttachResult.from_dict(response.json())

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


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[AttachResult | Error]:
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
    body: AttachLedgers,
) -> Response[AttachResult | Error]:
    """Attach CLOSED ledgers to the log in one CAS (a batch or streaming commit)

     Takes the writer role as POST /writer does (the last two ledgers fenced), appends the ledgers in the
    given order and leaves the role free (writer null, the epoch grows). Each ledger must exist, be
    CLOSED, have no password, not be in the log and carry custom metadata quire.log = the log's name.
    With commit {id, sequence} the log records the sequence under the id; a sequence at or below the one
    recorded changes nothing and answers committed: false (exactly-once commits). The same attach again
    (the log lists these ledgers, in this order: an earlier attempt landed) answers committed: true and
    changes nothing, so a retry after a lost answer is safe.

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        body (AttachLedgers): Body of POST /v1/logs/{name}/ledgers.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AttachResult | Error]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient,
    body: AttachLedgers,
) -> AttachResult | Error | None:
    """Attach CLOSED ledgers to the log in one CAS (a batch or streaming commit)

     Takes the writer role as POST /writer does (the last two ledgers fenced), appends the ledgers in the
    given order and leaves the role free (writer null, the epoch grows). Each ledger must exist, be
    CLOSED, have no password, not be in the log and carry custom metadata quire.log = the log's name.
    With commit {id, sequence} the log records the sequence under the id; a sequence at or below the one
    recorded changes nothing and answers committed: false (exactly-once commits). The same attach again
    (the log lists these ledgers, in this order: an earlier attempt landed) answers committed: true and
    changes nothing, so a retry after a lost answer is safe.

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        body (AttachLedgers): Body of POST /v1/logs/{name}/ledgers.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AttachResult | Error
    """

    return sync_detailed(
        name=name,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: AttachLedgers,
) -> Response[AttachResult | Error]:
    """Attach CLOSED ledgers to the log in one CAS (a batch or streaming commit)

     Takes the writer role as POST /writer does (the last two ledgers fenced), appends the ledgers in the
    given order and leaves the role free (writer null, the epoch grows). Each ledger must exist, be
    CLOSED, have no password, not be in the log and carry custom metadata quire.log = the log's name.
    With commit {id, sequence} the log records the sequence under the id; a sequence at or below the one
    recorded changes nothing and answers committed: false (exactly-once commits). The same attach again
    (the log lists these ledgers, in this order: an earlier attempt landed) answers committed: true and
    changes nothing, so a retry after a lost answer is safe.

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        body (AttachLedgers): Body of POST /v1/logs/{name}/ledgers.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AttachResult | Error]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient,
    body: AttachLedgers,
) -> AttachResult | Error | None:
    """Attach CLOSED ledgers to the log in one CAS (a batch or streaming commit)

     Takes the writer role as POST /writer does (the last two ledgers fenced), appends the ledgers in the
    given order and leaves the role free (writer null, the epoch grows). Each ledger must exist, be
    CLOSED, have no password, not be in the log and carry custom metadata quire.log = the log's name.
    With commit {id, sequence} the log records the sequence under the id; a sequence at or below the one
    recorded changes nothing and answers committed: false (exactly-once commits). The same attach again
    (the log lists these ledgers, in this order: an earlier attempt landed) answers committed: true and
    changes nothing, so a retry after a lost answer is safe.

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        body (AttachLedgers): Body of POST /v1/logs/{name}/ledgers.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AttachResult | Error
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            body=body,
        )
    ).parsed
