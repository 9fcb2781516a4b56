"""Document text: YAML front matter, titles, chunks and the passage that best matches a
query. Pure functions, no I/O.

Chunks are paragraphs packed up to ``CHUNK_CHARS`` characters (a paragraph longer than
that is cut at sentence ends, then at spaces). Search ranks whole documents; chunks pick
the passage a search result shows, so a hit deep inside a long document is summarized
by the text that matched, not by the document's opening.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from loci.checks import clean_tags
from loci.errors import ValidationError
from loci.knowledge.paths import name_of
from loci.models import Document
from loci.search import query_terms

CHUNK_CHARS = 1_500
SUMMARY_CHARS = 200
#: libyaml's safe loader when PyYAML was built with it (much faster).
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FRONT = re.compile(r"\A---[ \t]*\r?\n(?:(.*?)\r?\n)?---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class FrontMatter:
    """What a file's YAML front matter says: its title, tags and other keys."""

    title: str | None
    tags: tuple[str, ...]
    metadata: dict[str, Any]


def parse_front_matter(text: str, source: str = "<document>") -> tuple[FrontMatter, str]:
    """Split ``text`` into its front matter and body; no front matter: all body.

    ``tags`` may be a YAML list or a comma-separated string; every other key except
    ``title`` is kept as metadata (dates as ISO text, so it stays JSON)."""
    match = _FRONT.match(text)
    if match is None:
        return FrontMatter(None, (), {}), text
    try:
        meta = yaml.load(match.group(1) or "", Loader=_LOADER)  # a safe loader
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ValidationError(f"{source}: bad YAML front matter{at}: {problem}") from exc
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ValidationError(f"{source}: the front matter must be a mapping of keys")
    title = meta.pop("title", None)
    raw_tags = meta.pop("tags", None) or ()
    if isinstance(raw_tags, str):
        raw_tags = raw_tags.split(",")
    if not isinstance(raw_tags, (list, tuple)):
        raise ValidationError(f"{source}: 'tags' must be a list or comma-separated text")
    try:
        tags = clean_tags(raw_tags)
    except ValidationError as exc:
        raise ValidationError(f"{source}: {exc}") from exc
    extra = {str(k): _plain(v) for k, v in meta.items()}
    title_text = None if title is None else " ".join(str(title).split()) or None
    return FrontMatter(title_text, tags, extra), text[match.end():]


def _plain(value: Any) -> Any:
    """A YAML value as JSON-compatible data (dates become ISO text)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def title_of(document: Document) -> str:
    """The document's title: front matter ``title``, else its first heading, else its
    file name without extension."""
    title = document.metadata.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    return heading_or_name(document.path, document.content)


def heading_or_name(path: str, content: str) -> str:
    heading = _HEADING.search(content[:5_000])
    if heading:
        return heading.group(1).strip()
    return name_of(path).rsplit(".", 1)[0] or name_of(path)


def chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """``text`` in pieces of at most ``size`` characters along paragraph boundaries."""
    pieces: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        paragraph = paragraph.strip()
        if paragraph:
            pieces.extend(_split_long(paragraph, size))
    packed: list[str] = []
    for piece in pieces:
        if packed and len(packed[-1]) + 2 + len(piece) <= size:
            packed[-1] += "\n\n" + piece
        else:
            packed.append(piece)
    return packed


def _split_long(paragraph: str, size: int) -> list[str]:
    if len(paragraph) <= size:
        return [paragraph]
    out: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(paragraph):
        while len(sentence) > size:  # one enormous sentence: cut at a space
            cut = sentence.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size
            if current:
                out.append(current)
                current = ""
            out.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if current and len(current) + 1 + len(sentence) > size:
            out.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}".strip()
    if current:
        out.append(current)
    return out


def best_passage(text: str, query: str) -> str:
    """The chunk of ``text`` sharing the most distinct words with ``query`` (the first
    chunk when none does), starting at its first matching sentence."""
    parts = chunks(text) or [text]
    terms = set(query_terms(query))
    if not terms:
        return parts[0]

    def matched(part: str) -> int:
        return len(terms & {w.lower() for w in _WORD.findall(part)})

    best = max(parts, key=matched)  # max keeps the first of equal scores
    if matched(best) == 0:
        return parts[0]
    sentences = _SENTENCE_END.split(best)
    for i, sentence in enumerate(sentences):
        if terms & {w.lower() for w in _WORD.findall(sentence)}:
            return " ".join(sentences[i:])
    return best


def summarize(text: str, width: int = SUMMARY_CHARS) -> str:
    """One line of at most ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"
