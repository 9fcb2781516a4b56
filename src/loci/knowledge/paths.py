"""Knowledge-base paths and tags, validated in one place.

A document lives at an absolute, slash-separated path such as ``/profile/identity.md``
or ``/projects/loci/decisions/db.md``; a folder is a prefix ending in ``/``. Rules:

- absolute (starts with ``/``), no trailing ``/`` for a document;
- no empty segments (``/a//b``), no ``.`` or ``..`` segments, no backslashes;
- no control characters (NUL, newlines, tabs, DEL, C1 controls);
- no segment that starts or ends with whitespace;
- at most ``MAX_PATH_CHARS`` characters, ``MAX_SEGMENT_CHARS`` per segment and
  ``MAX_DEPTH`` segments.

Paths are normalized to Unicode NFC first, so the composed and decomposed spellings of
"café" name the same document. Anything else is a :class:`ValidationError` that says
what is wrong and what a valid path looks like.
"""

from __future__ import annotations

import re
import unicodedata

from loci.checks import check_text, control_character
from loci.errors import ValidationError

MAX_PATH_CHARS = 1024
MAX_SEGMENT_CHARS = 255
MAX_DEPTH = 32
#: The usual top-level folders; others are allowed too.
ROOTS = ("/profile/", "/conversations/", "/projects/", "/reference/", "/insights/")
PROFILE = "/profile/"
EXAMPLE = "'/reference/notes.md'"
_SLUG_DROP = re.compile(r"[^\w\s-]", re.UNICODE)
_SLUG_GAP = re.compile(r"[\s_-]+")


def _segments(path: str, what: str) -> list[str]:
    """The checked segments of an absolute path (without the leading slash)."""
    check_text(what, path)
    shown = repr(path if len(path) <= 80 else path[:77] + "...")
    if not path.startswith("/"):
        raise ValidationError(f"invalid {what} {shown}: paths are absolute, e.g. {EXAMPLE}")
    if len(path) > MAX_PATH_CHARS:
        raise ValidationError(f"invalid {what} {shown}: longer than {MAX_PATH_CHARS} characters")
    bad = control_character(path)
    if bad is not None:
        raise ValidationError(f"invalid {what} {shown}: contains the control character {bad}")
    if "\\" in path:
        raise ValidationError(f"invalid {what} {shown}: use '/' to separate folders, not '\\'")
    segments = path[1:].split("/")
    if len(segments) > MAX_DEPTH:
        raise ValidationError(f"invalid {what} {shown}: deeper than {MAX_DEPTH} folders")
    for segment in segments:
        if segment == "":
            raise ValidationError(f"invalid {what} {shown}: empty segment ('//' or a "
                                  "trailing '/'); name every folder, e.g. " + EXAMPLE)
        if segment in (".", ".."):
            raise ValidationError(f"invalid {what} {shown}: '.' and '..' are not allowed; "
                                  "write the full path from '/'")
        if segment != segment.strip():
            raise ValidationError(f"invalid {what} {shown}: a name starts or ends with a space")
        if len(segment) > MAX_SEGMENT_CHARS:
            raise ValidationError(f"invalid {what} {shown}: a name is longer than "
                                  f"{MAX_SEGMENT_CHARS} characters")
    return segments


def check_path(path: object) -> str:
    """A valid document path (NFC-normalized), or ``ValidationError``."""
    if not isinstance(path, str):
        raise ValidationError(f"a document path must be text, got {type(path).__name__}")
    path = unicodedata.normalize("NFC", path)
    if path.endswith("/") and len(path) > 1:
        raise ValidationError(f"invalid document path {path!r}: it names a folder; add a "
                              "file name, e.g. " + EXAMPLE)
    _segments(path, "document path")
    return path


def check_folder(prefix: object | None) -> str:
    """A valid folder prefix ending in ``/`` (``None`` and ``""`` mean the root)."""
    if prefix is None or prefix == "" or prefix == "/":
        return "/"
    if not isinstance(prefix, str):
        raise ValidationError(f"a folder must be text, got {type(prefix).__name__}")
    prefix = unicodedata.normalize("NFC", prefix)
    _segments(prefix[:-1] if prefix.endswith("/") else prefix, "folder")
    return prefix if prefix.endswith("/") else prefix + "/"


def join(folder: str, relative: str) -> str:
    """``relative`` (a POSIX relative path such as ``notes/a.md``) inside ``folder``."""
    return check_path(check_folder(folder) + relative.lstrip("/"))


def name_of(path: str) -> str:
    """The last segment of a path: ``/profile/people/rui.md`` → ``rui.md``."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def slugify(text: str, *, max_chars: int = 60, fallback: str = "untitled") -> str:
    """A lowercase file-name slug: ``"Sarah Chen"`` → ``sarah-chen``."""
    cleaned = _SLUG_DROP.sub(" ", unicodedata.normalize("NFKC", text).lower())
    slug = _SLUG_GAP.sub("-", cleaned).strip("-")[:max_chars].strip("-")
    return slug or fallback
