"""The one validation layer every face goes through (the engine calls it): what the
store accepts, a read can serve.

- text must be encodable: a lone surrogate (``"\\ud800"``, which JSON allows) cannot be
  stored as UTF-8, so it is refused, naming the field and the position;
- JSON values (metadata, tool arguments) must be JSON: string keys, finite numbers,
  integers within 64 bits, at most ``MAX_DEPTH`` levels (the encoder stops at 254) and
  ``MAX_VALUES`` values;
- names (users, agents, sessions) follow one rule wherever they enter: they become parts
  of file names (the memory mirror), so they are limited in bytes and are never a path
  (a user or agent holds no ``/`` or ``\\`` and is not ``.`` or ``..``; a session's
  ``/``-separated parts are none of them); and ``*`` is reserved (``OPERATOR``, the
  tenant of an operator key), so no name given as a user can mean "any user", and no
  agent's can be the one a user's shared memories are kept under (``SHARED_AGENT``);
- names already stored under the rule of older versions (``check_stored_name``) can
  still be exported and erased;
- search filters hold encodable text and times a datetime can move a day from
  (``timeutil.check_time``); a page starts within 64 bits; state keys starting with
  ``INTERNAL_STATE`` are Loci's own, which no client writes.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from loci.errors import ValidationError
from loci.models import SHARED_AGENT
from loci.timeutil import check_time

if TYPE_CHECKING:
    from loci.store.values import SearchFilters

#: Levels of nesting a stored JSON value may have.
MAX_DEPTH = 64
#: Values (scalars, lists and objects) one stored JSON value may hold.
MAX_VALUES = 100_000
#: Characters of one tag, and tags of one memory or document.
MAX_TAG_CHARS = 64
MAX_TAGS = 50
#: Characters one page of a memory or a document may hold.
MAX_PAGE = 100_000
#: The smallest context window a call may ask for.
MIN_WINDOW = 512
#: Bytes of UTF-8 a name may take (file systems allow 255 per path component).
MAX_NAME_BYTES = 200
_INT64 = 2 ** 63
_NAME = re.compile(r"[^\x00-\x1f\x7f]+")
#: The tenant of an operator key: any user, named by the request. No name may be it.
OPERATOR = "*"
#: Names that can never be a user's, agent's or session's: the operator's, the shared
#: memories' agent, and those a file path reads as a directory.
RESERVED_NAMES = frozenset({OPERATOR, SHARED_AGENT, ".", ".."})
#: State keys Loci keeps for itself: a session's focus, how far its turns were saved to
#: memory, the context edits its provider applies, the pending consolidation, an Agents
#: SDK session's items waiting for an event. No client writes them (a malformed one
#: would break what reads it).
INTERNAL_STATE = ("focus:", "flushed:", "provider_edits:", "consolidation:",
                  "agents_waiting:")


def check_text(field: str, value: Any) -> str:
    """``value`` if it is a string that UTF-8 can encode, else a ``ValidationError``."""
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{field} holds an unpaired surrogate ({value[exc.start]!r}) at character "
            f"{exc.start}: send valid Unicode text") from None
    return value


def control_character(text: str) -> str | None:
    """The first control character in ``text`` (as a repr), if any."""
    for char in text:
        if unicodedata.category(char) == "Cc":
            return repr(char)
    return None


def check_label(kind: str, value: Any) -> str:
    """A label that is no name (a state key, a model): printable, at most
    ``MAX_NAME_BYTES`` bytes of UTF-8, not only spaces."""
    if isinstance(value, str):
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            size = 0
        if 0 < size <= MAX_NAME_BYTES and _NAME.fullmatch(value) and value.strip():
            return value
    raise ValidationError(f"invalid {kind} {value!r}: use 1-{MAX_NAME_BYTES} bytes of "
                          "printable text")


def check_state_key(key: Any) -> str:
    """A state key a client may write: a label (``check_label``) outside
    ``INTERNAL_STATE``."""
    check_label("state key", key)
    if key.startswith(INTERNAL_STATE):
        raise ValidationError(f"state key {key!r} is reserved: keys starting with "
                              f"{', '.join(INTERNAL_STATE)} are Loci's own")
    return str(key)


def check_filters(filters: SearchFilters) -> SearchFilters:
    """Search filters whose texts UTF-8 can encode and whose times lie in range."""
    texts = [*filters.types, *filters.tags, *filters.sessions]
    texts += [t for t in (filters.session, filters.path_prefix) if t is not None]
    for text in texts:
        check_text("a search filter", text)
    since, until = (None if t is None else check_time(name, t) for name, t in (
        ("since", filters.since), ("until", filters.until)))
    return replace(filters, since=since, until=until)


#: A memory type name: a snake_case word.
_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def check_type(name: str) -> str:
    """Normalise a memory type name; reject anything but snake_case words."""
    normal = name.strip().lower()
    if not _TYPE_NAME.match(normal):
        raise ValidationError(
            f"invalid memory type {name!r}: use lowercase letters, digits and underscores"
        )
    return normal


def check_name(kind: str, value: Any) -> str:
    """User, agent and session names: a label (``check_label``) that is not reserved
    (``RESERVED_NAMES``) and no path: a user or an agent is one component of a file
    path (no ``/`` or ``\\``); a session may be ``/``-separated parts (``team/alpha``),
    none of them empty, ``.`` or ``..``."""
    check_label(kind, value)
    if value in RESERVED_NAMES:
        raise ValidationError(f"invalid {kind} {value!r}: the name is reserved")
    parts = value.split("/")
    if "\\" in value or (kind != "session" and len(parts) > 1):
        raise ValidationError(f"invalid {kind} {value!r}: a name holds no '/' or '\\'")
    if any(part in ("", ".", "..") for part in parts):
        raise ValidationError(f"invalid {kind} {value!r}: a session's parts between '/' "
                              "may not be empty, '.' or '..'")
    return str(value)


def check_stored_name(kind: str, value: Any) -> str:
    """A user name as older versions accepted it (``check_label``): rows stored under
    one that ``check_name`` now refuses can still be found, exported and erased."""
    return check_label(kind, value)


def check_json(field: str, value: Any) -> Any:
    """``value`` if it is JSON that reads back as written, else a ``ValidationError``."""
    if not value and (value is None or isinstance(value, dict | list)):
        return value
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ValidationError(f"{field} holds more than {MAX_VALUES:,} values")
        if depth > MAX_DEPTH:
            raise ValidationError(f"{field} is nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise ValidationError(f"{field}: object keys must be strings")
                check_text(f"{field} key", key)
                stack.append((child, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            check_text(field, item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not -_INT64 <= item < _INT64:
                raise ValidationError(f"{field}: integers must fit in 64 bits")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValidationError(f"{field}: numbers must be finite")
        else:
            raise ValidationError(f"{field}: {type(item).__name__} is not a JSON value")
    return value


def parse_tags(value: str | None) -> tuple[str, ...]:
    """Comma-separated tags (``"a, b"``) as a clean tuple."""
    return clean_tags(part for part in (value or "").split(","))


def clean_tags(tags: Iterable[object]) -> tuple[str, ...]:
    """Tags without surrounding space, inner whitespace turned into ``-``, each once in
    order; a tag with a control character or over ``MAX_TAG_CHARS`` is an error."""
    cleaned: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, (str, int, float)) or isinstance(tag, bool):
            raise ValidationError(f"a tag must be text, got {tag!r}")
        text = "-".join(str(tag).split())
        if not text:
            continue
        if control_character(text) is not None or len(text) > MAX_TAG_CHARS:
            raise ValidationError(f"invalid tag {text[:80]!r}: use up to {MAX_TAG_CHARS} "
                                  "printable characters")
        check_text("tag", text)
        cleaned[text] = None
    if len(cleaned) > MAX_TAGS:
        raise ValidationError(f"at most {MAX_TAGS} tags")
    return tuple(cleaned)


def check_page(offset: int, limit: int) -> tuple[int, int]:
    """A page of a text to read: from ``offset``, ``limit`` characters (``MAX_PAGE``
    at most)."""
    if not 0 <= offset < _INT64 or not 0 < limit <= MAX_PAGE:
        raise ValidationError(f"offset must be a whole number >= 0 and limit in "
                              f"1..{MAX_PAGE:,}")
    return offset, limit


def check_call(message: str | None, window: int | None, model: str | None
               ) -> int | None:
    """What a compile is asked for (each optional): its message, a per-call window and
    the model's name; the window."""
    if message is not None:
        check_text("message", message)
    if model is not None:
        check_label("model", model)
    return check_window(window)


def check_timeout(timeout: float | None) -> float | None:
    """Seconds to wait (None: as long as it takes); past what a lock can wait, as long
    as it takes."""
    if timeout is None or timeout >= threading.TIMEOUT_MAX:
        return None
    if not timeout >= 0:  # negative, or not a number
        raise ValidationError(f"timeout must be a number of seconds >= 0, not {timeout!r}")
    return timeout


def check_window(window: int | None) -> int | None:
    """A per-call context window: a whole number of tokens, at least ``MIN_WINDOW``."""
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                               or window < MIN_WINDOW):
        raise ValidationError(f"window must be a whole number of tokens >= {MIN_WINDOW}")
    return window
