from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.take_writer_response_400 import TakeWriterResponse400
from ...models.take_writer_response_401 import TakeWriterResponse401
from ...models.take_writer_response_404 import TakeWriterResponse404
from ...models.take_writer_response_409 import TakeWriterResponse409
from ...models.take_writer_response_503 import TakeWriterResponse503
from ...models.take_writer_response_504 import TakeWriterResponse504
from ...models.writer_taken import WriterTaken
from ...types import Response


def _get_kwargs(
    name: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/logs/{name}/writer".format(
            name=quote(str(name), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    TakeWriterResponse400
    | TakeWriterResponse401
    | TakeWriterResponse404
    | TakeWriterResponse409
    | TakeWriterResponse503
    | TakeWriterResponse504
    | WriterTaken
    | None
):
    if response.status_code == 200:
        response_200 = WriterTaken.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = TakeWriterResponse400.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = TakeWriterResponse401.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = TakeWriterResponse404.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = TakeWriterResponse409.from_dict(response.json())

        return response_409

    if response.status_code == 503:
        response_503 = TakeWriterResponse503.from_dict(response.json())

        return response_503

    if response.status_code == 504:
        response_504 = TakeWriterResponse504.from_dict(response.json())

        return response_504

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    TakeWriterResponse400
    | TakeWriterResponse401
    | TakeWriterResponse404
    | TakeWriterResponse409
    | TakeWriterResponse503
    | TakeWriterResponse504
    | WriterTaken
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
    TakeWriterResponse400
    | TakeWriterResponse401
    | TakeWriterResponse404
    | TakeWriterResponse409
    | TakeWriterResponse503
    | TakeWriterResponse504
    | WriterTaken
]:
    """Take the log's writer role (fences the last two ledgers, creates one, CAS)

    Args:
        name (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[TakeWriterResponse400 | TakeWriterResponse401 | TakeWriterResponse404 | TakeWriterResponse409 | TakeWriterResponse503 | TakeWriterResponse504 | WriterTaken]
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
    TakeWriterResponse400
    | TakeWriterResponse401
    | TakeWriterResponse404
    | TakeWriterResponse409
    | TakeWriterResponse503
    | TakeWriterResponse504
    | WriterTaken
    | None
):
    """Take the log's writer role (fences the last two ledgers, creates one, CAS)

    Args:
        name (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        TakeWriterResponse400 | TakeWriterResponse401 | TakeWriterResponse404 | TakeWriterResponse409 | TakeWriterResponse503 | TakeWriterResponse504 | WriterTaken
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
    TakeWriterResponse400
    | TakeWriterResponse401
    | TakeWriterResponse404
    | TakeWriterResponse409
    | TakeWriterResponse503
    | TakeWriterResponse504
    | WriterTaken
]:
    """Take the log's writer role (fences the last two ledgers, creates one, CAS)

    Args:
        name (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[TakeWriterResponse400 | TakeWriterResponse401 | TakeWriterResponse404 | TakeWriterResponse409 | TakeWriterResponse503 | TakeWriterResponse504 | WriterTaken]
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
    TakeWriterResponse400
    | TakeWriterResponse401
    | TakeWriterResponse404
    | TakeWriterResponse409
    | TakeWriterResponse503
    | TakeWriterResponse504
    | WriterTaken
    | None
):
    """Take the log's writer role (fences the last two ledgers, creates one, CAS)

    Args:
        name (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        TakeWriterResponse400 | TakeWriterResponse401 | TakeWriterResponse404 | TakeWriterResponse409 | TakeWriterResponse503 | TakeWriterResponse504 | WriterTaken
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
        )
    ).parsed
