from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.log_model import LogModel
from ...models.patch_log import PatchLog
from ...types import UNSET, Response


def _get_kwargs(
    name: str,
    *,
    body: PatchLog | PatchLog | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "patch",
        "url": "/v1/logs/{name}".format(
            name=quote(str(name), safe=""),
        ),
    }

    if isinstance(body, PatchLog):
        _kwargs["json"] = body.to_dict()

        headers["Content-Type"] = "application/json"
    if isinstance(body, PatchLog):
        _kwargs["json"] = body.to_dict()

        headers["Content-Type"] = "application/merge-patch+json"

    _kwargs["headers"] = headers
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
    body: PatchLog | PatchLog | Unset = UNSET,
) -> Response[Error | LogModel]:
    """Change a log's retention policy (a JSON merge patch)

     The body names `retention`: fields given a value take it, fields given null are cleared, fields not
    named stay; `"retention": null` clears the policy. Needs the admin scope (a policy removes data).
    The next retention pass of the auditor applies it.

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        body (PatchLog): Body of PATCH /v1/logs/{name} (a JSON merge patch, RFC 7396).
        body (PatchLog): Body of PATCH /v1/logs/{name} (a JSON merge patch, RFC 7396).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | LogModel]
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
    body: PatchLog | PatchLog | Unset = UNSET,
) -> Error | LogModel | None:
    """Change a log's retention policy (a JSON merge patch)

     The body names `retention`: fields given a value take it, fields given null are cleared, fields not
    named stay; `"retention": null` clears the policy. Needs the admin scope (a policy removes data).
    The next retention pass of the auditor applies it.

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        body (PatchLog): Body of PATCH /v1/logs/{name} (a JSON merge patch, RFC 7396).
        body (PatchLog): Body of PATCH /v1/logs/{name} (a JSON merge patch, RFC 7396).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | LogModel
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
    body: PatchLog | PatchLog | Unset = UNSET,
) -> Response[Error | LogModel]:
    """Change a log's retention policy (a JSON merge patch)

     The body names `retention`: fields given a value take it, fields given null are cleared, fields not
    named stay; `"retention": null` clears the policy. Needs the admin scope (a policy removes data).
    The next retention pass of the auditor applies it.

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        body (PatchLog): Body of PATCH /v1/logs/{name} (a JSON merge patch, RFC 7396).
        body (PatchLog): Body of PATCH /v1/logs/{name} (a JSON merge patch, RFC 7396).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | LogModel]
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
    body: PatchLog | PatchLog | Unset = UNSET,
) -> Error | LogModel | None:
    """Change a log's retention policy (a JSON merge patch)

     The body names `retention`: fields given a value take it, fields given null are cleared, fields not
    named stay; `"retention": null` clears the policy. Needs the admin scope (a policy removes data).
    The next retention pass of the auditor applies it.

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        body (PatchLog): Body of PATCH /v1/logs/{name} (a JSON merge patch, RFC 7396).
        body (PatchLog): Body of PATCH /v1/logs/{name} (a JSON merge patch, RFC 7396).

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
            body=body,
        )
    ).parsed
