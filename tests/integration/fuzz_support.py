"""Schemathesis against a live service, from the document it serves: every operation
fuzzed with valid and invalid input (hypothesis, derandomized: the same cases on every
run), then the stateful scenarios its OpenAPI links describe (and those schemathesis
infers), every request counted and every answer checked: status code, content type,
headers and body against the document, valid input not refused, invalid input not
accepted, and no server error beyond the ones the contract allows."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import hypothesis
import hypothesis.strategies as st
import requests
import schemathesis
from hypothesis import HealthCheck, Phase
from hypothesis.errors import Flaky, Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import CheckContext
from schemathesis.core.failures import FailureGroup, ServerError
from schemathesis.core.transport import Response
from schemathesis.engine.errors import is_inconsistent_replay
from schemathesis.generation.case import Case as GenericCase
from schemathesis.hooks import HookContext
from schemathesis.schemas import APIOperation as GenericOperation
from schemathesis.schemas import BaseSchema
from schemathesis.transport.serialization import Binary

from gateway.limits import (
    METADATA_KEY_MAX_BYTES,
    METADATA_TOTAL_MAX_BYTES,
    METADATA_VALUE_MAX_BYTES,
)
from services.limits import ID_MAX
from services.wire import digest, framing

Case = GenericCase[Any]
APIOperation = GenericOperation[Any, Any, Any, Any]

# Long polls (`wait_ms` with an `after` the service has not reached) would hold a request
# for up to 30 s: generation keeps every value (so both modes reach the parameter), but an
# integer above this is sent as this many milliseconds (other values go unchanged).
WAIT_MS_SENT_MAX = 20
SETTINGS_BASE: dict[str, Any] = {
    "derandomize": True,  # the same cases on every run, without a database
    "database": None,
    "deadline": None,  # a live service over HTTP: time is the service's, not ours
    # Failures are reported with the case that found them (a curl line), not shrunk:
    # shrinking against a live service costs an unbounded number of requests.
    "phases": [Phase.explicit, Phase.generate],
    "suppress_health_check": list(HealthCheck),
    "report_multiple_bugs": False,
}
# Operations whose valid-looking input is refused with 400 invalid_argument by design when
# it does not fit the state of the cluster, so that 400 is an acceptable answer to valid
# input there: a position outside the log (docs/api.md: "a position outside the log") on a
# read or a truncation; attaching ledgers to a log (the Spark commit), which takes only
# existing CLOSED ledgers made for that log, without a password, not in it yet
# (tests/integration/test_logs_attach.py).
STATE_CHECKED = ("read_records", "truncate_log", "attach_ledgers")
# Schemathesis's own list of the answers that reject invalid input (its default).
REJECTIONS = ["400", "401", "403", "404", "405", "406", "409", "415", "422", "428", "429", "5xx"]
# A failure's text in the report: a curl line of a 10,000-entry batch runs to 80 kB.
FAILURE_TEXT_MAX_CHARS = 4000
# Stateful sessions: each runs this many scenarios (or stops early, inconsistent), the
# counts are checked between sessions, at most 1,000 scenarios in all. Sessions of 10, not
# 25: each new session starts its root calls in another order, so the rare chains (a log
# created, then read) come sooner, and the phase overshoots its counts by less (the
# gateway's scenarios: about 800 requests instead of 1,300).
SCENARIOS_PER_SESSION = 10
STATEFUL_SESSIONS_MAX = 100
EXPECTED_LAST_POSITION = "Expected-Last-Position"
QUORUMS = ("ensemble_size", "write_quorum", "ack_quorum")
QUORUM_DEFAULTS = (3, 2, 2)

# A bookie's add body (framed records) goes out as the bytes generated, as binary does.
schemathesis.serializer.alias(framing.MEDIA_TYPE, "application/octet-stream")


@dataclass
class Report:
    """What one service's run did: requests and answers per operation, and the failures
    as readable text (each with a curl line that replays it)."""

    statuses: dict[str, dict[int, int]] = field(default_factory=dict)  # label -> status -> n
    waited_s: dict[str, float] = field(default_factory=dict)  # label -> time in answers
    wall_s: dict[str, float] = field(default_factory=dict)  # "label [mode]" -> time
    stateful: dict[str, int] = field(default_factory=dict)  # label -> requests in scenarios
    failures: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(sum(by_status.values()) for by_status in self.statuses.values())

    def count(self, label: str, status: int, elapsed_s: float) -> None:
        by_status = self.statuses.setdefault(label, {})
        by_status[status] = by_status.get(status, 0) + 1
        self.waited_s[label] = self.waited_s.get(label, 0.0) + elapsed_s

    def summary(self) -> str:
        lines = [f"{self.total} requests ({sum(self.stateful.values())} in scenarios)"]
        for label, by_status in sorted(self.statuses.items()):
            answers = ", ".join(f"{s}: {n}" for s, n in sorted(by_status.items()))
            lines.append(f"  {label}: {answers} ({self.waited_s[label]:.1f} s in answers)")
        lines += [f"  in scenarios {label}: {n}" for label, n in sorted(self.stateful.items())]
        lines += [f"  {key}: {s:.1f} s" for key, s in sorted(self.wall_s.items())]
        return "\n".join(lines)


def contract_server_errors(allowed: dict[int, set[str]]) -> Callable[..., None]:
    """A check that fails on any 5xx except the given statuses with one of their docs/api.md
    error codes (``{503: {"not_enough_bookies"}}``: a ledger wider than the cluster)."""

    def no_unexpected_server_error(ctx: CheckContext, response: Response, case: Case) -> None:
        if response.status_code < 500:
            return
        try:
            code = response.json().get("error")
        except Exception:  # noqa: BLE001 - a body that is not an error object fails below
            code = None
        if code not in allowed.get(response.status_code, set()):
            raise ServerError(
                operation=case.operation.label,
                status_code=response.status_code,
                message=f"not allowed here by the contract: {response.text[:500]}",
            )

    return no_unexpected_server_error


def load(url: str) -> BaseSchema:
    """The document a live service serves, to be called at the URL it is served from."""
    config = schemathesis.Config.from_dict(
        {
            "checks": {
                # Replaced by `contract_server_errors`, stricter about which 5xx may occur.
                "not_a_server_error": {"enabled": False},
                # Invalid input may also be too large: docs/api.md's 413 payload_too_large (a
                # batch over 10,000 entries, documented as maxItems).
                "negative_data_rejection": {"expected-statuses": [*REJECTIONS, "413"]},
            },
            "generation": {"database": "none"},
            "operations": [
                {
                    "include-operation-id": operation_id,
                    "checks": {
                        "positive_data_acceptance": {
                            "expected-statuses": ["2xx", "400", "404", "409"]
                        }
                    },
                }
                for operation_id in STATE_CHECKED
            ]
            + [
                # A valid conditional append whose condition does not hold is 412
                # position_mismatch (docs/api.md "POST /v1/logs/{name}/records"): the
                # answer depends on the log's state, not on the request alone.
                {
                    "include-operation-id": "append_records",
                    "checks": {
                        "positive_data_acceptance": {
                            "expected-statuses": [
                                "2xx",
                                "3xx",
                                "401",
                                "403",
                                "404",
                                "409",
                                "412",
                                "429",
                                "5xx",
                            ]  # fmt: skip
                        }
                    },
                }
            ],
        }
    )
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", config=config)
    schema.config.update(base_url=url)
    schema.hooks.register_hook_with_name(framed_records, "flatmap_body")
    return schema


def bound_long_polls(case: Case) -> None:
    query = case.query
    if isinstance(query, dict):
        wait = query.get("wait_ms")
        if isinstance(wait, int) and not isinstance(wait, bool) and wait > WAIT_MS_SENT_MAX:
            query["wait_ms"] = WAIT_MS_SENT_MAX


def within_contract(case: Case, quorum_max: int | None = None) -> Case:
    """A valid case kept valid under the rules of docs/api.md that JSON Schema cannot state
    (so that their 400 is not counted as valid input refused): ``from <= to`` when both
    are given (swapped otherwise); a position's ids at most 2^63-1 (its pattern allows 19
    digits), in a query's ``from`` and ``before`` and in an append's
    ``Expected-Last-Position``; ``E >= Qw >= Qa`` in a ledger's or log's settings (sorted
    so, defaults filled in) and no wider than ``quorum_max`` when given; an hmac-sha256
    ledger has a password; custom metadata within its byte bounds (keys of at most 256
    bytes, values of 4096, 16384 in all: JSON Schema counts characters); a retention
    policy's ``max_backlog_bytes`` comes with ``retain_for_cursors``; a bookie's
    ``stride`` comes with ``residues``, distinct integers below it (derived from the
    stride; both dropped without one)."""
    query = case.query
    if isinstance(query, dict):
        first, last = query.get("from"), query.get("to")
        if isinstance(first, int) and isinstance(last, int) and first > last:
            query["from"], query["to"] = last, first
        for name in ("from", "before"):
            value = query.get(name)
            if isinstance(value, str):
                query[name] = _ids_within_bounds(value)
        if "stride" in query or "residues" in query:
            stride = query.get("stride")
            if isinstance(stride, int) and stride > 0:
                query["residues"] = ",".join(str(r) for r in range(0, stride, 3))
            else:
                query.pop("stride", None)
                query.pop("residues", None)
    headers = case.headers  # a case-insensitive mapping, not a dict
    if isinstance(headers, MutableMapping):
        condition = headers.get(EXPECTED_LAST_POSITION)
        if isinstance(condition, str):
            headers[EXPECTED_LAST_POSITION] = _ids_within_bounds(condition)
    body = case.body
    if isinstance(body, dict):
        _quorums_in_order(body, quorum_max)
        policy = body.get("retention")
        if isinstance(policy, dict) and policy.get("max_backlog_bytes") is not None:
            policy["retain_for_cursors"] = True
        metadata = body.get("metadata")
        if isinstance(metadata, dict):
            body["metadata"] = _metadata_within_bounds(metadata)
        if body.get("digest") == "hmac-sha256" and not body.get("password"):
            body["password"] = "fuzz-password"
    return case


def _ids_within_bounds(position: str) -> str:
    return re.sub(r"[0-9]{19}", lambda m: str(min(int(m[0]), ID_MAX)), position)


def _quorums_in_order(body: dict[str, Any], quorum_max: int | None) -> None:
    if not any(key in body for key in QUORUMS):
        return
    given = [body.get(key, default) for key, default in zip(QUORUMS, QUORUM_DEFAULTS, strict=True)]
    numbers = [v for v in given if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) != len(QUORUMS):
        return
    ordered = sorted(numbers, reverse=True)
    if quorum_max is not None:
        ordered = [min(value, quorum_max) for value in ordered]
    body.update(zip(QUORUMS, ordered, strict=True))


def _cut(text: str, size_max: int) -> str:
    return text.encode()[:size_max].decode(errors="ignore")


def _metadata_within_bounds(metadata: dict[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    total = 0
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            return metadata  # not what a valid case holds: left as it is
        key, value = _cut(key, METADATA_KEY_MAX_BYTES), _cut(value, METADATA_VALUE_MAX_BYTES)
        size = len(key.encode()) + len(value.encode())
        if total + size <= METADATA_TOTAL_MAX_BYTES:
            kept[key] = value
            total += size
    return kept


def _sealed(
    ledger_id: int, entry_id: int, payload: bytes, digest_type: str
) -> framing.FramedRecord:
    record = framing.FramedRecord(
        ledger_id,
        entry_id,
        entry_id - 1,
        payload,
        digest_type=digest_type,
        length=len(payload) * (entry_id + 1),
    )
    return digest.seal(record, key=b"fuzz-key")


# Valid bodies of a bookie's add (services/wire/framing.py): one to three sealed records of
# any ledger, entry and payload, digest none or hmac-sha256 (the gateway checks those; a
# bookie checks the record checksum `encode` adds). Invalid ones are any other bytes.
RECORDS = st.lists(
    st.builds(
        _sealed,
        st.integers(0, 2**40),
        st.integers(0, 2**20),
        st.binary(max_size=64),
        st.sampled_from(["none", "hmac-sha256"]),
    ),
    min_size=1,
    max_size=3,
)


def framed_records(context: HookContext, body: Any) -> st.SearchStrategy[Any]:
    """A ``flatmap_body`` hook: the valid body of a bookie's add (the ``Binary`` bytes
    generated for a binary body) becomes framed records, before schemathesis takes the
    case's measure (an edit after it would make the case count as invalid input)."""
    operation = context.operation
    if operation is not None and operation.label == "POST /v1/entries" and isinstance(body, Binary):
        return RECORDS.map(lambda records: Binary(framing.encode(records)))
    return st.just(body)


def _truncated(records: list[Any]) -> st.SearchStrategy[bytes]:
    """The framed ``records`` cut short anywhere but at the end of a record: a cut
    between two records would leave a whole, valid sequence (a fuzz run found one)."""
    body = framing.encode(records)
    whole = {len(framing.encode(records[:count])) for count in range(len(records) + 1)}
    sizes = [size for size in range(len(body)) if size not in whole]
    return st.sampled_from(sizes).map(lambda size: body[:size])


# Invalid bodies of a bookie's add, which schemathesis cannot make for a binary body: any
# bytes, or framed records cut short (neither is a whole sequence of records).
MALFORMED = st.one_of(
    st.binary(min_size=1, max_size=256),
    RECORDS.flatmap(_truncated),
)


def with_malformed_records(case: Case) -> st.SearchStrategy[Case]:
    """``case`` with an invalid add body: edited after generation, it counts as invalid
    input (schemathesis judges an edited binary body so), which the bookie must refuse."""

    def put(body: bytes) -> Case:
        case.body = Binary(body)
        return case

    return MALFORMED.map(put)


def local_session() -> requests.Session:
    """A session for a service on loopback: no proxy or .netrc looked up in the
    environment (requests does that on every request otherwise: a twentieth of the
    fuzzer's CPU)."""
    session = requests.Session()
    session.trust_env = False
    return session


def operations(schema: BaseSchema) -> Iterator[APIOperation]:
    for result in schema.get_all_operations():
        yield result.ok()  # type: ignore[union-attr]  # an invalid document fails here


@dataclass
class Fuzzer:
    """Drives one service: ``run_operations`` then ``run_stateful``, into ``report``."""

    schema: BaseSchema
    check: Callable[..., None]
    # The cluster's bookies: the ledgers of the stateful scenarios and the logs of both
    # phases are no wider (valid settings anyway), so that later calls can use them; a
    # wider one ends each chain at its first step (503 not_enough_bookies). The ledgers
    # of the per-operation phase keep any width.
    quorum_max: int | None = None
    report: Report = field(default_factory=Report)
    session: requests.Session = field(default_factory=lambda: local_session())
    timeout_s: float = 30.0

    def call(self, case: Case) -> Response:
        bound_long_polls(case)
        response = case.call(session=self.session, timeout=self.timeout_s)
        self.report.count(case.operation.label, response.status_code, response.elapsed)
        return response

    def validate(self, case: Case, response: Response) -> None:
        case.validate_response(response, additional_checks=[self.check])

    def run_operations(self, examples_per_mode: int) -> None:
        """Every operation, ``examples_per_mode`` valid and as many invalid cases; a
        failure is recorded (with a curl line to replay it) and the run goes on."""
        for operation in operations(self.schema):
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                self._run_operation(operation, mode, examples_per_mode)

    def _strategy(self, operation: APIOperation, mode: GenerationMode) -> st.SearchStrategy[Case]:
        if mode is GenerationMode.NEGATIVE and operation.label == "POST /v1/entries":
            valid = operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
            return valid.flatmap(with_malformed_records)
        strategy = operation.as_strategy(generation_mode=mode)
        if mode is not GenerationMode.POSITIVE:
            return strategy
        quorum_max = self.quorum_max if operation.label == "PUT /v1/logs/{name}" else None
        return strategy.map(lambda case: within_contract(case, quorum_max))

    def _run_operation(self, operation: APIOperation, mode: GenerationMode, n: int) -> None:
        @hypothesis.settings(max_examples=n, **SETTINGS_BASE)
        @hypothesis.given(case=self._strategy(operation, mode))
        def fuzz(case: Case) -> None:
            response = self.call(case)
            try:
                self.validate(case, response)
            except FailureGroup as group:
                raise AssertionError(f"{case.as_curl_command()}\n{group}") from None

        started = time.monotonic()
        try:
            fuzz()
        except Unsatisfiable:
            pass  # no input of this kind exists (e.g. no invalid one without parameters)
        except (Exception, FailureGroup) as exc:  # collected, reported at the end
            text = describe(exc)[:FAILURE_TEXT_MAX_CHARS]
            self.report.failures.append(f"{operation.label} [{mode.value}]: {text}")
        finally:
            self.report.wall_s[f"{operation.label} [{mode.value}]"] = time.monotonic() - started

    def run_stateful(
        self,
        requests_min: int,
        steps: int,
        without: tuple[str, ...] = (),
        each: tuple[str, ...] = (),
        each_min: int = 0,
    ) -> None:
        """Sessions of chains of up to ``steps`` calls along the document's links (create
        -> append -> read -> close) and the ones schemathesis infers, until they made
        ``requests_min`` requests and each operation of ``each`` (labels) was called
        ``each_min`` times in them, each answer checked like the others; the operations
        ``without`` (ids) take no part. (How often a chain reaches its last link depends
        on the live service's answers, so a fixed number of requests may fall short of
        it by luck; the sessions stay bounded, and the caller asserts the counts.)

        Hypothesis replays the start of a scenario to vary it, and against a live service
        a replay may see other answers (ids that moved on) and so draw differently: it
        then stops the session as inconsistent. Like schemathesis's own runner, a new
        session then starts, its root calls in another (seeded) order."""
        fuzzer = self
        schema = self.schema.exclude(operation_id=list(without)) if without else self.schema

        class Machine(schema.as_state_machine()):  # type: ignore[misc]
            def call(self, case: Case, **kwargs: Any) -> Response:
                if case.meta is None or case.meta.generation.mode is GenerationMode.POSITIVE:
                    within_contract(case, fuzzer.quorum_max)
                response = fuzzer.call(case)
                label = case.operation.label
                fuzzer.report.stateful[label] = fuzzer.report.stateful.get(label, 0) + 1
                return response

            def validate_response(
                self,
                response: Response,
                case: Case,
                additional_checks: list[Any] | None = None,
                **kwargs: Any,
            ) -> None:
                fuzzer.validate(case, response)

        settings = hypothesis.settings(
            max_examples=SCENARIOS_PER_SESSION, stateful_step_count=steps, **SETTINGS_BASE
        )
        counts = self.report.stateful
        for session in range(STATEFUL_SESSIONS_MAX):
            if sum(counts.values()) >= requests_min and all(
                counts.get(label, 0) >= each_min for label in each
            ):
                return
            Machine.rule_order_seed = session
            try:
                Machine.run(settings=settings)
            except (Exception, FailureGroup) as exc:
                if isinstance(exc, Flaky) or is_inconsistent_replay(exc):
                    continue  # the service's answers changed a replay: a new session
                self.report.failures.append(f"stateful: {describe(exc)[:FAILURE_TEXT_MAX_CHARS]}")
                return
        self.report.failures.append(
            f"stateful: {sum(self.report.stateful.values())} requests in "
            f"{STATEFUL_SESSIONS_MAX} sessions, fewer than {requests_min}"
        )


def examples_per_mode(schema: BaseSchema, requests_min: int) -> int:
    """Examples per operation and mode so that the operations with inputs alone make
    ``requests_min`` requests (an operation without any input gives one case each), a
    tenth more: some run out of distinct invalid inputs before that."""
    with_inputs = sum(1 for op in operations(schema) if _has_inputs(op))
    return math.ceil(requests_min * 1.1 / (2 * max(1, with_inputs)))


def _has_inputs(operation: APIOperation) -> bool:
    definition = operation.definition.raw
    return bool(definition.get("parameters") or definition.get("requestBody"))


def describe(exc: BaseException) -> str:
    """An exception and those it groups (hypothesis wraps a failure it could not
    reproduce in a FlakyFailure group: what failed is inside)."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, BaseExceptionGroup) and not isinstance(exc, FailureGroup):
        text += "".join(f"\n  - {describe(inner)}" for inner in exc.exceptions)
    return text


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)
