"""Images, documents and audio in the new message of a proxied call (or in the tool
results it brings).

They go to the upstream with the call, in the upstream's own shape, and the log keeps a
line per attachment in place of its bytes (``[image: image/png]``): the next calls see
that something was shown, not the pixels. A part stays as the client sent it and is
translated only when the upstream speaks the other API:

- OpenAI content parts: ``image_url`` (a URL or a ``data:`` URL), ``file`` (``file_data``
  as a ``data:`` URL, or a ``file_id``), ``input_audio``;
- Anthropic blocks: ``image`` and ``document`` (``base64``, ``url`` or ``text`` sources).

What one API cannot express for the other (an OpenAI ``file_id`` or audio for Anthropic,
a document by URL for OpenAI) is a clear 422, never a silent drop.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from loci.apis.wire import JSONObject
from loci.errors import ValidationError

#: Part types that are attachments (the rest of a message's parts are text).
MEDIA_PARTS = frozenset({"image_url", "file", "input_audio", "image", "document"})
_DATA_URL = re.compile(r"^data:(?P<type>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)


def split_media(content: Any) -> tuple[list[JSONObject], list[JSONObject]]:
    """(the text parts, the attachments) of a message's ``content``."""
    if not isinstance(content, list):
        return [], []
    media = [dict(p) for p in content if _is_media(p)]
    return [p for p in content if not _is_media(p)], media


def _is_media(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") in MEDIA_PARTS


def logged(text: str, media: Sequence[Mapping[str, Any]]) -> str:
    """What the log keeps of a message: its text, then a line per attachment."""
    lines = "\n".join(f"[{_kind(part)}: {_label(part)}]" for part in media)
    return "\n".join(t for t in (text, lines) if t)


def openai_parts(parts: Sequence[Mapping[str, Any]]) -> list[JSONObject]:
    """The attachments as OpenAI chat content parts."""
    return [_openai(part) for part in parts]


def anthropic_blocks(parts: Sequence[Mapping[str, Any]]) -> list[JSONObject]:
    """The attachments as Anthropic content blocks."""
    return [_anthropic(part) for part in parts]


def _kind(part: Mapping[str, Any]) -> str:
    kind = str(part.get("type"))
    return {"image_url": "image", "input_audio": "audio", "file": "document"}.get(kind, kind)


def _label(part: Mapping[str, Any]) -> str:
    kind = part.get("type")
    if kind == "image_url":
        url = str(_inner(part, "image_url").get("url") or "")
        found = _DATA_URL.match(url)
        return found["type"] if found else url[:200]
    if kind == "file":
        file = _inner(part, "file")
        return str(file.get("filename") or file.get("file_id") or "file")
    if kind == "input_audio":
        return str(_inner(part, "input_audio").get("format") or "audio")
    source = _inner(part, "source")
    title = part.get("title")
    label = source.get("media_type") or source.get("url") or source.get("type") or kind
    return f"{title} ({label})" if isinstance(title, str) and title else str(label)[:200]


def _inner(part: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = part.get(key)
    return value if isinstance(value, Mapping) else {}


def _openai(part: Mapping[str, Any]) -> JSONObject:
    kind = part.get("type")
    if kind in ("image_url", "file", "input_audio"):
        return dict(part)
    source = _inner(part, "source")
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
        if kind == "image":
            return {"type": "image_url", "image_url": {"url": url}}
        return {"type": "file", "file": {"file_data": url,
                                         "filename": str(part.get("title") or "document")}}
    if kind == "image" and source.get("type") == "url":
        return {"type": "image_url", "image_url": {"url": source.get("url")}}
    if kind == "document" and source.get("type") == "text":
        return {"type": "text", "text": str(source.get("data") or "")}
    raise ValidationError(f"an {kind} with a {source.get('type')!r} source cannot be sent "
                          "to an OpenAI-compatible upstream: send it as base64")


def _anthropic(part: Mapping[str, Any]) -> JSONObject:
    kind = part.get("type")
    if kind in ("image", "document"):
        return dict(part)
    if kind == "image_url":
        url = str(_inner(part, "image_url").get("url") or "")
        found = _DATA_URL.match(url)
        source = ({"type": "base64", "media_type": found["type"], "data": found["data"]}
                  if found else {"type": "url", "url": url})
        return {"type": "image", "source": source}
    found = _DATA_URL.match(str(_inner(part, "file").get("file_data") or ""))
    if kind == "file" and found:
        block: JSONObject = {"type": "document", "source": {
            "type": "base64", "media_type": found["type"], "data": found["data"]}}
        if _inner(part, "file").get("filename"):
            block["title"] = str(_inner(part, "file")["filename"])
        return block
    raise ValidationError(f"a {kind} part ({_label(part)}) cannot be sent to an Anthropic "
                          "upstream: send images and PDFs as data URLs")


def responses_parts(parts: Sequence[Mapping[str, Any]]) -> list[JSONObject]:
    """The attachments as Responses input content parts (through their chat shape)."""
    out = []
    for part in map(_openai, parts):
        if part["type"] == "image_url":
            image = _inner(part, "image_url")
            out.append({"type": "input_image", "image_url": image.get("url"),
                        **({"detail": image["detail"]} if image.get("detail") else {})})
        elif part["type"] == "file":
            out.append({"type": "input_file", **dict(_inner(part, "file"))})
        elif part["type"] == "text":
            out.append({"type": "input_text", "text": part.get("text") or ""})
        else:
            raise ValidationError(f"a {_kind(part)} part ({_label(part)}) cannot be sent to "
                                  "a Responses upstream")
    return out
