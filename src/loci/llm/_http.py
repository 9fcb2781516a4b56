"""The HTTP plumbing shared by the chat providers: JSON POSTs, Server-Sent Events and
one translation of every transport or server failure into a
:class:`~loci.errors.ProviderError` whose message says what to check.

The API key never appears in a message: it is only ever sent as a header, and any
echo of it in a server's error text is redacted, before the text is cut to length (cut
first, a key that straddles the cut would leave its head behind).

A stream is read a network read at a time (``stream_reads``): the events of one read
are split (``data_of``) and their JSON decoded together (or, for runs of text events,
not decoded one by one: ``_runs``), so that a fast upstream's many small events
cost per read, not per event, here and in whatever relays them.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NamedTuple, NoReturn
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson
from httpcore._sync.http11 import HTTP11Connection

from loci.errors import ConfigError, ProviderError
from loci.llm._runs import TextRuns
from loci.providers import error_detail

_STATUS_HINTS = {
    400: "check llm.model and the request (the model may not accept these messages)",
    401: "check the API key (llm.api_key / LOCI_LLM_API_KEY)",
    403: "check the API key and that it may use this model",
    404: "check llm.base_url and llm.model (the model may not exist on this server)",
    408: "the server timed out: retry, or raise llm.timeout",
    413: "the request is too large for the server: compact the input first",
    429: "the server is rate-limiting or out of quota: retry later",
}


#: The most a response is read at a time. httpcore reads 64 KiB, so a fast upstream's
#: stream costs everything downstream of a read (events, the tag filter, the write to
#: the client) once per 64 KiB; a read returns whatever has arrived, so a larger one
#: never waits for more and a slow stream is not delayed.
READ_BYTES = 256 * 1024
if getattr(HTTP11Connection, "READ_NUM_BYTES", READ_BYTES) < READ_BYTES:
    HTTP11Connection.READ_NUM_BYTES = READ_BYTES


class ServerSentEvent(NamedTuple):
    """One SSE event: its ``event:`` name ("" when absent) and its joined ``data:``."""

    event: str
    data: str


class ChatTransport:
    """An ``httpx.Client`` bound to one endpoint, with Loci's error messages."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        timeout: float,
        secret: str | None = None,
        what: str = "the chat server",
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.where = f"{what} at {without_userinfo(url)}"
        userinfo = urlsplit(url).netloc.rpartition("@")[0]
        self._secrets = [s for s in (secret, userinfo) if s]
        self._client = httpx.Client(timeout=timeout, headers=dict(headers))

    def post_json(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
                  ) -> Any:
        """POST ``body`` (with ``headers`` besides the client's) and return the decoded
        JSON answer."""
        with self._guard():
            response = self._client.post(self.url, json=dict(body), headers=headers)
        self._check_status(response)
        try:
            return response.json()
        except ValueError as exc:
            raise ProviderError(
                f"{self.where} did not answer JSON ({self.redact(response.text, 80)!r}): "
                "is llm.base_url the right API (OpenAI-compatible URLs usually end in /v1)?"
            ) from exc

    def stream_reads(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
                     ) -> Iterator[str]:
        """POST ``body``; the answer's text as it arrives, in whole events (lines ending
        in LF, no blank line after the last)."""
        with self._guard(), self._client.stream("POST", self.url, json=dict(body),
                                                headers=headers) as response:
            if response.status_code >= 400:
                response.read()
                self._check_status(response)
            kind = response.headers.get("content-type", "")
            if "json" in kind and "event-stream" not in kind:
                response.read()
                self.fail_stream(f"answered JSON instead of an event stream: "
                                 f"{self.redact(response.text, 120)!r}")
            events = SSEDecoder()
            for raw in response.iter_bytes():
                if text := events.feed(raw):
                    yield text
            if text := events.end():
                yield text

    def stream_events(self, body: Mapping[str, Any], runs: TextRuns,
                      headers: Mapping[str, str] | None = None, end: str | None = None
                      ) -> Iterator[tuple[list[Any], bool]]:
        """POST ``body``; the answer's events a network read at a time, decoded, and
        whether the ``end`` payload came. A read that is one run of text events comes
        as one event (``runs``); the others are decoded up to ``end`` and teach
        ``runs`` their template."""
        for read in self.stream_reads(body, headers):
            if (text := runs.merge(read)) is not None:
                yield [runs.event(text)], False
                continue
            payloads = data_of(read)
            events, ended = self.decode_all(payloads, end)
            runs.learn(payloads, events)
            yield events, ended

    def decode(self, data: str) -> Any:
        """The JSON of one SSE ``data`` payload, or a ProviderError saying it is not."""
        try:
            return orjson.loads(data)
        except ValueError:  # orjson is strict; the standard parser takes NaN and such
            pass
        try:
            return json.loads(data)
        except ValueError:
            self.fail_stream(f"sent a malformed event ({self.redact(data, 80)!r})")

    def decode_all(self, payloads: list[str], end: str | None = None
                   ) -> tuple[list[Any], bool]:
        """``decode`` of each payload up to the first that is ``end`` (spaces aside), and
        whether that came; the common case without a call per payload."""
        try:
            return list(map(orjson.loads, payloads)), False
        except ValueError:
            pass
        at = next((i for i, data in enumerate(payloads) if data.strip() == end), None)
        return [self.decode(data) for data in payloads[:at]], at is not None

    def fail_stream(self, problem: str) -> NoReturn:
        raise ProviderError(
            f"{self.where} {problem}: check that llm.base_url points at an API of this kind "
            "and that the server supports streaming"
        )

    @contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except httpx.TimeoutException as exc:
            raise ProviderError(
                f"{self.where} did not answer within {self.timeout:g}s: check that it is up "
                "and the model is loaded, or raise llm.timeout"
            ) from exc
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"cannot reach {self.where} ({exc.__class__.__name__}: "
                f"{self.redact(str(exc))}): check llm.base_url and that the server is running"
            ) from exc

    def _check_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if status < 400:
            return
        hint = _STATUS_HINTS.get(status) or (
            "the server failed or is overloaded; retry later or check its logs"
            if status >= 500 else "check llm.model and the request"
        )
        detail = self.redact(error_detail(response), 200)
        raise ProviderError(f"{self.where} answered HTTP {status}: {detail}; {hint}")

    def redact(self, text: str, limit: int | None = None) -> str:
        """``text`` without the credentials, then cut to ``limit`` characters."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text if limit is None else text[:limit]

    def close(self) -> None:
        self._client.close()


class SSEDecoder:
    """Bytes of a text/event-stream in, the text of whole events out (blank-line
    separated, lines ending in LF), a read at a time: lines end at CR, LF or CRLF, even
    across reads."""

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")("replace")
        self._rest = ""  # the text after the last whole event

    def feed(self, raw: bytes) -> str:
        text = self._rest + self._text.decode(raw)
        if "\r" in text:
            # A CR at the end may be the first half of a CRLF: it waits for the next read.
            held = text.endswith("\r")
            text = text[:-1] if held else text
            text = text.replace("\r\n", "\n").replace("\r", "\n") + ("\r" if held else "")
        end = text.rfind("\n\n")
        if end == -1:
            self._rest = text
            return ""
        self._rest = text[end + 2:]
        return text[:end]

    def end(self) -> str:
        """The rest, an event even without the blank line that should end it."""
        text = (self._rest + self._text.decode(b"", final=True)).replace("\r", "\n")
        self._rest = ""
        return text.strip("\n")


def data_of(text: str) -> list[str]:
    """The ``data`` of each event in ``text`` (whole events, lines ending in LF)."""
    if text.startswith("data: "):  # nearly always: events of one "data:" line each
        payloads = text[6:].split("\n\ndata: ")
        if text.count("\n") == 2 * (len(payloads) - 1):  # no line but these
            return payloads
    return [event.data for event in events_of(text)]


def events_of(text: str) -> list[ServerSentEvent]:
    """The events in ``text`` (whole events, lines ending in LF)."""
    events: list[ServerSentEvent] = []
    for block in text.split("\n\n"):
        if block:
            events.extend(parse_sse(iter(block.split("\n"))))
    return events


def parse_sse(lines: Iterator[str]) -> Iterator[ServerSentEvent]:
    """Events of a text/event-stream: ``event:``/``data:`` fields, blank-line separated."""
    event = ""
    data: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r")
        if not line:
            if data:
                yield ServerSentEvent(event, "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    if data:
        yield ServerSentEvent(event, "\n".join(data))


def check_base_url(base_url: str, provider: str) -> str:
    """``base_url`` without its trailing slash, or a ConfigError if it is not HTTP(S)."""
    if not base_url.startswith(("http://", "https://")):
        raise ConfigError(
            f"{provider} base_url must start with http:// or https://: {base_url!r}"
        )
    return base_url.rstrip("/")


def without_userinfo(url: str) -> str:
    """``url`` without ``user:password@``, as errors may show it to API clients."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))
