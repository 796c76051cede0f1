from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.append_records_json_body import AppendRecordsJsonBody
from ...models.appended import Appended
from ...models.batch_appended import BatchAppended
from ...models.error import Error
from ...types import UNSET, File, Response, Unset


def _get_kwargs(
    name: str,
    *,
    body: AppendRecordsJsonBody | File | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    expected_last_position: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    if not isinstance(expected_last_position, Unset):
        headers["Expected-Last-Position"] = expected_last_position

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/logs/{name}/records".format(
            name=quote(str(name), safe=""),
        ),
    }

    if isinstance(body, AppendRecordsJsonBody):
        if not isinstance(body, Unset):
            _kwargs["json"] = body.to_dict()

        headers["Content-Type"] = "application/json"
    if isinstance(body, File):
        if not isinstance(body, Unset):
            _kwargs["content"] = body.payload
        headers["Content-Type"] = "application/octet-stream"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Appended | BatchAppended | Error | None:
    if response.status_code == 200:

        def _parse_response_200(data: object) -> Appended | BatchAppended:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                response_200_type_0 = Appended.from_dict(data)

                return response_200_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            response_200_type_1 = BatchAppended.from_dict(data)

            return response_200_type_1

        response_200 = _parse_response_200(response.json())

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

    if response.status_code == 412:
        response_412 = Error.from_dict(response.json())

        return response_412

    if response.status_code == 413:
        response_413 = Error.from_dict(response.json())

        return response_413

    if response.status_code == 503:
        response_503 = Error.from_dict(response.json())

        return response_503

    if response.status_code == 504:
        response_504 = Error.from_dict(response.json())

        return response_504

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Appended | BatchAppended | Error]:
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
    body: AppendRecordsJsonBody | File | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    expected_last_position: str | Unset = UNSET,
) -> Response[Appended | BatchAppended | Error]:
    """Append one record (raw body) or a batch (JSON); any gateway takes it

     The gateway writing the log appends it; any other gateway forwards it there and answers what that
    gateway answered, or takes the writer role first when the log has no live writer (a gateway run with
    --no-log-forwarding answers 409 not_writer instead). With Expected-Last-Position the append happens
    only if the log's last record is there (412 position_mismatch otherwise).

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        idempotency_key (str | Unset): 1-128 printable ASCII characters: a retry with the same key
            and body within the dedup window answers the original positions and appends nothing
        expected_last_position (str | Unset): LID:EID, or `none` for a log with no record: append
            only if the log's last record is there, else 412 position_mismatch (with the actual
            last_position) and nothing is appended
        body (AppendRecordsJsonBody | Unset):
        body (File | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Appended | BatchAppended | Error]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
        idempotency_key=idempotency_key,
        expected_last_position=expected_last_position,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient,
    body: AppendRecordsJsonBody | File | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    expected_last_position: str | Unset = UNSET,
) -> Appended | BatchAppended | Error | None:
    """Append one record (raw body) or a batch (JSON); any gateway takes it

     The gateway writing the log appends it; any other gateway forwards it there and answers what that
    gateway answered, or takes the writer role first when the log has no live writer (a gateway run with
    --no-log-forwarding answers 409 not_writer instead). With Expected-Last-Position the append happens
    only if the log's last record is there (412 position_mismatch otherwise).

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        idempotency_key (str | Unset): 1-128 printable ASCII characters: a retry with the same key
            and body within the dedup window answers the original positions and appends nothing
        expected_last_position (str | Unset): LID:EID, or `none` for a log with no record: append
            only if the log's last record is there, else 412 position_mismatch (with the actual
            last_position) and nothing is appended
        body (AppendRecordsJsonBody | Unset):
        body (File | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Appended | BatchAppended | Error
    """

    return sync_detailed(
        name=name,
        client=client,
        body=body,
        idempotency_key=idempotency_key,
        expected_last_position=expected_last_position,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: AppendRecordsJsonBody | File | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    expected_last_position: str | Unset = UNSET,
) -> Response[Appended | BatchAppended | Error]:
    """Append one record (raw body) or a batch (JSON); any gateway takes it

     The gateway writing the log appends it; any other gateway forwards it there and answers what that
    gateway answered, or takes the writer role first when the log has no live writer (a gateway run with
    --no-log-forwarding answers 409 not_writer instead). With Expected-Last-Position the append happens
    only if the log's last record is there (412 position_mismatch otherwise).

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        idempotency_key (str | Unset): 1-128 printable ASCII characters: a retry with the same key
            and body within the dedup window answers the original positions and appends nothing
        expected_last_position (str | Unset): LID:EID, or `none` for a log with no record: append
            only if the log's last record is there, else 412 position_mismatch (with the actual
            last_position) and nothing is appended
        body (AppendRecordsJsonBody | Unset):
        body (File | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Appended | BatchAppended | Error]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
        idempotency_key=idempotency_key,
        expected_last_position=expected_last_position,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient,
    body: AppendRecordsJsonBody | File | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    expected_last_position: str | Unset = UNSET,
) -> Appended | BatchAppended | Error | None:
    """Append one record (raw body) or a batch (JSON); any gateway takes it

     The gateway writing the log appends it; any other gateway forwards it there and answers what that
    gateway answered, or takes the writer role first when the log has no live writer (a gateway run with
    --no-log-forwarding answers 409 not_writer instead). With Expected-Last-Position the append happens
    only if the log's last record is there (412 position_mismatch otherwise).

    Args:
        name (str): 1-200 characters of A-Za-z0-9._-
        idempotency_key (str | Unset): 1-128 printable ASCII characters: a retry with the same key
            and body within the dedup window answers the original positions and appends nothing
        expected_last_position (str | Unset): LID:EID, or `none` for a log with no record: append
            only if the log's last record is there, else 412 position_mismatch (with the actual
            last_position) and nothing is appended
        body (AppendRecordsJsonBody | Unset):
        body (File | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Appended | BatchAppended | Error
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            body=body,
            idempotency_key=idempotency_key,
            expected_last_position=expected_last_position,
        )
    ).parsed
