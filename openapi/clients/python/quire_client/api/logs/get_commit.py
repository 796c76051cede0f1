from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.commit_model import CommitModel
from ...models.error import Error
from ...types import Response


def _get_kwargs(
    name: str,
    commit_id: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/logs/{name}/commits/{commit_id}".format(
            name=quote(str(name), safe=""),
            commit_id=quote(str(commit_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> CommitModel | Error | None:
    if response.status_code == 200:
        response_200 = CommitModel.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[CommitModel | Error]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    name: str,
    commit_id: str,
    *,
    client: AuthenticatedClient,
) -> Response[CommitModel | Error]:
    """The last sequence committed under a commit id (POST /ledgers)

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        commit_id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CommitModel | Error]
    """

    kwargs = _get_kwargs(
        name=name,
        commit_id=commit_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    commit_id: str,
    *,
    client: AuthenticatedClient,
) -> CommitModel | Error | None:
    """The last sequence committed under a commit id (POST /ledgers)

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        commit_id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CommitModel | Error
    """

    return sync_detailed(
        name=name,
        commit_id=commit_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    name: str,
    commit_id: str,
    *,
    client: AuthenticatedClient,
) -> Response[CommitModel | Error]:
    """The last sequence committed under a commit id (POST /ledgers)

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        commit_id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CommitModel | Error]
    """

    kwargs = _get_kwargs(
        name=name,
        commit_id=commit_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    commit_id: str,
    *,
    client: AuthenticatedClient,
) -> CommitModel | Error | None:
    """The last sequence committed under a commit id (POST /ledgers)

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        commit_id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CommitModel | Error
    """

    return (
        await asyncio_detailed(
            name=name,
            commit_id=commit_id,
            client=client,
        )
    ).parsed
