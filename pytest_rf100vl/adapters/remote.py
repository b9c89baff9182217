"""Calls to a model behind a server, bounded in time and money, retried, counted, and kept
free of secrets; one implementation for every served adapter (``openai``, ``gemini``).

- **In flight**: at most ``concurrency`` requests at once (a semaphore held only while a
  request is on the wire, not while it waits to be retried).
- **Time**: every attempt ends within ``timeout`` seconds, connection, headers and body
  together, however slowly the server sends them (:meth:`RemoteCalls.deadline`, which the
  adapters' clients hold to: :mod:`.bounded_http`); a question is given up after
  ``max_retries`` retries; with ``pair_timeout``, the requests of a pair end within that many
  seconds of its start (a request in flight is cut at it, later ones are not sent).
- **Retries**: 408, 409, 429, 5xx, time-outs, connection errors and unreadable responses
  (not JSON, cut short) are retried by ``tenacity`` (the clients' own retries are off, so
  every attempt is admitted, counted and capped here) with exponential backoff and jitter
  (``retry_base_delay * 2**n``, at most ``retry_max_delay``, the wait drawn from its upper
  half), or after exactly the ``Retry-After`` the server asked for (seconds or an HTTP date);
  a server asking for more than ``retry_max_delay`` is not waited for. Each timing option has
  a documented range (:data:`RANGES`): a value outside it is an error naming the option. Other 4xx answers are
  not retried; 401, 403 and 404 (bad key, no access, no such model) stop every later request
  of the adapter at once, with the same message, rather than failing image by image.
- **Spend**: ``max_requests`` caps the requests sent (every attempt counts, retries too) over
  the adapter's life; ``max_cost`` the estimated cost (tokens the server reported, times
  ``input_price``/``output_price`` per million tokens). Requests in flight when the cost cap
  is reached still finish. A question refused by a cap fails with a message that says so.
- **Failures**: a question that gets no answer raises :class:`RequestFailed`; the runner
  counts its image as failed (no detections) and never caches it.
- **Secrets**: every message that leaves this module (errors, logs, warnings) and every answer
  a server sends (its text and the model it names) passes the session's scrubber
  (:mod:`rf100vl_hf.redact`, which the adapter told its key and its base URL's credentials),
  and errors are raised without their cause, so no library's traceback can carry them.

Per-pair columns (:meth:`RemoteCalls.pair_columns`): ``api_requests``, ``api_retries``,
``api_failed_requests``, ``api_unreadable_responses``, ``api_input_tokens``,
``api_output_tokens``, ``api_requests_without_usage``, ``api_latency_p50_ms`` and
``api_latency_p95_ms`` (of the attempts that were answered, from send to answer) and
``api_cost_estimate`` (``None`` without prices).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, NoReturn

import numpy as np
import tenacity

from rf100vl_hf import redact

log = logging.getLogger(__name__)

RETRIED_STATUS = frozenset({408, 409, 429})
"""Client-error statuses worth another try (time-out, conflict, rate limit); every 5xx is too."""
FATAL_STATUS = frozenset({401, 403, 404})
"""Statuses that no later request will escape (bad key, no access, unknown model)."""
RANGES: dict[str, tuple[float, float]] = {
    "concurrency": (1, 1024),
    "timeout": (0, 3600),
    "max_retries": (0, 100),
    "retry_base_delay": (0, 600),
    "retry_max_delay": (0, 600),
    "pair_timeout": (0, 10**7),
    "max_requests": (0, float("inf")),
    "max_cost": (0, float("inf")),
    "input_price": (0, float("inf")),
    "output_price": (0, float("inf")),
}
"""The values each option of :class:`CallPolicy` may take (``timeout`` and ``pair_timeout``
above their minimum): a delay of 10**12 seconds is a mistake, never a wait."""


class Fault(Exception):
    """One attempt that got no usable answer: why (already scrubbed), whether to try again,
    how long the server asked to wait, and whether the body could not be read."""

    def __init__(self, reason: str, *, retry: bool, retry_after: float | None = None, fatal: bool = False,
                 unreadable: bool = False):
        super().__init__(reason)
        self.reason, self.retry, self.retry_after, self.fatal, self.unreadable = (
            reason, retry, retry_after, fatal, unreadable)


class RequestFailed(RuntimeError):
    """A question that got no answer (retries spent, refused by the server or by a cap)."""


@dataclass(frozen=True)
class Answer:
    """What a server answered to one request: the text, the tokens it reported (``None``
    when it reported none), whether the answer stopped at the token limit, and the model
    the server says answered."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    truncated: bool = False
    model: str | None = None


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` header as seconds from ``now``: a number, or an HTTP date; ``None``
    when absent or unreadable (the backoff decides then)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def status_fault(status: int, detail: str, headers: Mapping[str, str] | None = None) -> Fault:
    """The :class:`Fault` of an HTTP error answer (``detail``: the server's message, scrubbed)."""
    retry_after = retry_after_seconds((headers or {}).get("retry-after"))
    reason = f"HTTP {status}: {detail}".rstrip(": ")
    return Fault(reason, retry=status in RETRIED_STATUS or status >= 500, retry_after=retry_after,
                 fatal=status in FATAL_STATUS)


def pause(seconds: float) -> None:
    """Wait before a retry (a function of its own, so tests can record the waits instead)."""
    time.sleep(seconds)


@dataclass
class Tally:
    """Counts of requests and tokens (for the adapter's life, or for one pair)."""

    requests: int = 0
    retries: int = 0
    failed_requests: int = 0
    unreadable_responses: int = 0
    requests_without_usage: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class CallPolicy:
    """How requests are made: see the module docstring for each field."""

    concurrency: int = 4
    timeout: float = 120.0
    max_retries: int = 4
    retry_base_delay: float = 1.0
    retry_max_delay: float = 60.0
    pair_timeout: float | None = None
    max_requests: int | None = None
    max_cost: float | None = None
    input_price: float | None = None
    output_price: float | None = None

    OPTIONS = ("concurrency", "timeout", "max_retries", "retry_base_delay", "retry_max_delay", "pair_timeout",
               "max_requests", "max_cost", "input_price", "output_price")

    @classmethod
    def from_options(cls, options: Mapping[str, Any], where: str) -> CallPolicy:
        """The policy of an adapter's options, each checked against :data:`RANGES` (``where``
        names the adapter in errors)."""

        def number(key: str, whole: bool = False, positive: bool = False) -> Any:
            value = options[key]
            if value is None:
                return None
            try:
                amount = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"{where}: option {key}={value!r} is not a number") from None
            low, high = RANGES[key]
            if not np.isfinite(amount) or not low <= amount <= high or (positive and amount == low) or (
                    whole and amount != int(amount)):
                kind = "a whole number" if whole else "a number"
                bound = (f"above {low:g}" if positive else f"at least {low:g}") + (
                    f" and at most {high:g}" if np.isfinite(high) else "")
                raise ValueError(f"{where}: option {key}={value!r} must be {kind} {bound}")
            return int(amount) if whole else amount

        policy = cls(
            concurrency=number("concurrency", whole=True),
            timeout=number("timeout", positive=True),
            max_retries=number("max_retries", whole=True),
            retry_base_delay=number("retry_base_delay"),
            retry_max_delay=number("retry_max_delay"),
            pair_timeout=number("pair_timeout", positive=True),
            max_requests=number("max_requests", whole=True),
            max_cost=number("max_cost"),
            input_price=number("input_price"),
            output_price=number("output_price"),
        )
        if None in (policy.concurrency, policy.timeout, policy.max_retries, policy.retry_base_delay,
                    policy.retry_max_delay):
            raise ValueError(f"{where}: concurrency, timeout, max_retries and the retry delays need values")
        if (policy.input_price is None) != (policy.output_price is None):
            raise ValueError(f"{where}: give both input_price and output_price (per million tokens), or neither")
        if policy.max_cost is not None and policy.input_price is None:
            raise ValueError(f"{where}: max_cost needs input_price and output_price (per million tokens)")
        return policy

    @property
    def priced(self) -> bool:
        return self.input_price is not None and self.output_price is not None

    def cost(self, tally: Tally) -> float | None:
        """The estimated cost of ``tally``'s tokens; ``None`` without prices."""
        if not self.priced:
            return None
        spent = tally.input_tokens * self.input_price + tally.output_tokens * self.output_price  # type: ignore[operator]
        return spent / 1e6


class RemoteCalls:
    """Every request of one served adapter goes through :meth:`call` (thread-safe)."""

    def __init__(self, policy: CallPolicy, label: str, secrets: Iterable[str] = ()):
        self.policy = policy
        self.label = label
        redact.remember_all(secrets)
        self.total = Tally()
        self.pair = Tally()
        self._latencies: list[float] = []
        self._models: set[str] = set()
        self._fatal: str | None = None
        self._pair_ends: float | None = None
        self._attempt = threading.local()  # the end of the attempt this thread is making
        self._slots = threading.BoundedSemaphore(policy.concurrency)
        self._lock = threading.Lock()
        # base * 2**n seconds, at most max, drawn from the upper half: half of it fixed, half random
        half_base, half_max = policy.retry_base_delay / 2, policy.retry_max_delay / 2
        self._backoff = (tenacity.wait_exponential(multiplier=half_base, max=half_max)
                         + tenacity.wait_random_exponential(multiplier=half_base, max=half_max))

    @staticmethod
    def scrub(text: str) -> str:
        """``text`` with every secret of the session masked (:func:`rf100vl_hf.redact.scrub`)."""
        return redact.scrub(text)

    def deadline(self) -> float:
        """When (``time.monotonic``) a request starting now must be answered: by the end of the
        attempt this thread is making (a redirect does not start the clock again), else
        ``timeout`` from now; never after the pair's end."""
        return getattr(self._attempt, "ends", None) or self._fresh_deadline()

    def _fresh_deadline(self) -> float:
        ends = time.monotonic() + self.policy.timeout
        return min(ends, self._pair_ends) if self._pair_ends is not None else ends

    def call(self, attempt: Callable[[], Answer]) -> Answer:
        """``attempt()`` until it answers, within the policy; :class:`RequestFailed` when it
        cannot. ``attempt`` raises :class:`Fault` for a failed attempt (anything else it
        raises is a failure too, never retried). The answer's text and model are scrubbed.

        tenacity makes the attempts: :meth:`_admit` before each, :meth:`_wait` between them,
        :meth:`_verdict` to stop, and :func:`pause` to sleep."""
        retrying = tenacity.Retrying(
            before=lambda state: self._admit(retry=state.attempt_number > 1),
            retry=tenacity.retry_if_exception(lambda error: isinstance(error, Fault) and error.retry),
            wait=self._wait, stop=lambda state: self._verdict(state) is not None, sleep=pause,
            before_sleep=lambda state: log.info("%s: %s; retrying in %.2f s", self.label,
                                                redact.scrub(state.outcome.exception().reason), state.upcoming_sleep),
            retry_error_callback=lambda state: self._fail(self._verdict(state) or state.outcome.exception().reason),
        )
        try:
            return retrying(self._attempt_once, attempt)
        except Fault as fault:  # not worth another try
            self._fail(fault.reason)

    def _attempt_once(self, attempt: Callable[[], Answer]) -> Answer:
        """One attempt, within a slot and its deadline; a fault is counted and raised."""
        try:
            with self._slots:
                began = time.perf_counter()
                self._attempt.ends = self._fresh_deadline()
                answer = attempt()
        except Fault as fault:
            with self._lock:
                for tally in (self.total, self.pair):
                    tally.unreadable_responses += int(fault.unreadable)
                if fault.fatal:
                    self._fatal = (f"the server refused an earlier request ({redact.scrub(fault.reason)}); "
                                   "no further requests are sent")
            raise
        except Exception as error:  # a bug or an unforeseen client error: not retried
            self._fail(f"{type(error).__name__}: {error}")
        finally:
            self._attempt.ends = None
        answer = replace(answer, text=redact.scrub(answer.text),
                         model=redact.scrub(answer.model) if answer.model else answer.model)
        self._answered(answer, time.perf_counter() - began)
        return answer

    def _pair_over(self) -> bool:
        return self._pair_ends is not None and time.monotonic() >= self._pair_ends

    def _admit(self, retry: bool) -> None:
        """Count one more request, or refuse it (a cap or the pair's deadline reached, or a
        fatal answer before)."""
        with self._lock:
            refusal = self._fatal
            if refusal is None and self._pair_over():
                refusal = f"pair_timeout={self.policy.pair_timeout:g} s reached: request not sent"
            if refusal is None and self.policy.max_requests is not None and (
                    self.total.requests >= self.policy.max_requests):
                refusal = (f"max_requests={self.policy.max_requests} reached: request not sent "
                           f"(raise it with the adapter option max_requests)")
            spent = self.policy.cost(self.total)
            if refusal is None and self.policy.max_cost is not None and spent is not None and (
                    spent >= self.policy.max_cost):
                refusal = f"max_cost={self.policy.max_cost:g} reached (estimated {spent:.4f}): request not sent"
            if refusal is None:
                for tally in (self.total, self.pair):
                    tally.requests += 1
                    tally.retries += int(retry)
        if refusal is not None:
            self._fail(refusal)

    def _wait(self, state: tenacity.RetryCallState) -> float:
        """The wait before the next attempt: the ``Retry-After`` the server asked for, else the backoff."""
        fault = state.outcome.exception()  # type: ignore[union-attr]
        return fault.retry_after if fault.retry_after is not None else self._backoff(state)

    def _verdict(self, state: tenacity.RetryCallState) -> str | None:
        """Why a failed attempt is the question's last (``None``: wait ``upcoming_sleep`` and retry)."""
        fault = state.outcome.exception()  # type: ignore[union-attr]
        reason, tries, delay = fault.reason, state.attempt_number, state.upcoming_sleep
        if self._pair_over():
            return f"{reason}; pair_timeout={self.policy.pair_timeout:g} s reached"
        if tries > self.policy.max_retries:
            return f"{reason} (gave up after {tries} attempt{'s' if tries > 1 else ''})"
        if fault.retry_after is not None and fault.retry_after > self.policy.retry_max_delay:
            return (f"{reason}; the server asked to wait {fault.retry_after:g} s, more than "
                    f"retry_max_delay={self.policy.retry_max_delay:g}")
        if self._pair_ends is not None and time.monotonic() + delay >= self._pair_ends:
            return f"{reason}; waiting {delay:.2f} s would pass pair_timeout={self.policy.pair_timeout:g} s"
        return None

    def _fail(self, reason: str) -> NoReturn:
        with self._lock:
            self.total.failed_requests += 1
            self.pair.failed_requests += 1
        raise RequestFailed(redact.scrub(f"{self.label}: {reason}")) from None

    def _answered(self, answer: Answer, seconds: float) -> None:
        with self._lock:
            for tally in (self.total, self.pair):
                if answer.input_tokens is None and answer.output_tokens is None:
                    tally.requests_without_usage += 1
                tally.input_tokens += answer.input_tokens or 0
                tally.output_tokens += answer.output_tokens or 0
            self._latencies.append(seconds * 1000)
            if answer.model:
                self._models.add(answer.model)

    def start_pair(self) -> None:
        """Count a new pair, and start its ``pair_timeout``."""
        with self._lock:
            self.pair = Tally()
            self._pair_ends = (time.monotonic() + self.policy.pair_timeout if self.policy.pair_timeout is not None
                               else None)
            self._latencies = []
            self._models = set()

    def pair_columns(self) -> dict[str, Any]:
        """The pair's counts since :meth:`start_pair` (see the module docstring)."""
        with self._lock:
            latencies = np.asarray(self._latencies)
            columns: dict[str, Any] = {f"api_{field.name}": getattr(self.pair, field.name) for field in fields(Tally)}
            columns["api_latency_p50_ms"] = float(np.percentile(latencies, 50)) if latencies.size else None
            columns["api_latency_p95_ms"] = float(np.percentile(latencies, 95)) if latencies.size else None
            columns["api_cost_estimate"] = self.policy.cost(self.pair)
            columns["api_served_model"] = ", ".join(sorted(self._models)) or None
        return columns
