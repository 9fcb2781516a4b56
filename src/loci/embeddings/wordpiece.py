"""A pure-Python BERT uncased WordPiece tokenizer over the bundled ``vocab.txt``.

The bundled local model (all-MiniLM-L6-v2) needs the BERT *uncased* tokenizer, which
its ONNX package does not ship. This module reimplements it with the standard library
only, following the Hugging Face fast tokenizer (``BertNormalizer`` with
``clean_text``, ``handle_chinese_chars``, accent stripping and lowercasing, then
``BertPreTokenizer`` and ``WordPiece`` with ``##`` continuations and at most 100
characters a word), so that the ids are identical to what sentence-transformers feeds
the model.

``vocab.txt`` is the 30,522-token bert-base-uncased vocabulary (sha256
``07eced37…c992038a3``) as shipped with sentence-transformers/all-MiniLM-L6-v2;
both are published under the Apache License 2.0 (see ``vocab.NOTICE``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

VOCAB_PATH = Path(__file__).with_name("vocab.txt")

_MAX_WORD_CHARS = 100
_CACHE_LIMIT = 100_000
# Characters removed by clean_text: control, format and private use (not unassigned).
_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Co"})
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),  # sic: the Rust tokenizer's range, which skips 0x2B820-0x2B91F
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
# ASCII fast path: tab/newline/return become spaces, other controls disappear.
_ASCII_CLEAN = {c: None for c in (*range(0, 32), 127)} | {9: 32, 10: 32, 13: 32}
_ASCII_WORDS = re.compile(r"[a-z0-9]+|[^a-z0-9 ]")


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _normalize_unicode(text: str) -> str:
    """BertNormalizer for non-ASCII text, with spaces around CJK and punctuation."""
    cleaned: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp in (0, 0xFFFD):
            continue
        if ch in "\t\n\r":
            cleaned.append(" ")
        elif unicodedata.category(ch) in _CONTROL_CATEGORIES:
            continue
        elif ch.isspace():
            cleaned.append(" ")
        elif _is_cjk(cp):
            cleaned.append(f" {ch} ")
        else:
            cleaned.append(ch)
    decomposed = unicodedata.normalize("NFD", "".join(cleaned))
    stripped = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
    # Lowercase character by character, as the Rust normalizer does (no final sigma).
    lowered = stripped.replace("\u03a3", "\u03c3").lower()
    return "".join(f" {c} " if _is_punctuation(c) else c for c in lowered)


def basic_tokenize(text: str) -> list[str]:
    """Split text into lowercase, accent-free words and single punctuation marks."""
    if text.isascii():
        return _ASCII_WORDS.findall(text.translate(_ASCII_CLEAN).lower())
    return _normalize_unicode(text).split()


class WordPieceTokenizer:
    """Turns texts into BERT uncased token ids: ``[CLS] … [SEP]``, truncated."""

    def __init__(self, vocab_path: Path = VOCAB_PATH, max_tokens: int = 256) -> None:
        if max_tokens < 2:
            raise ValueError("max_tokens must be at least 2 ([CLS] and [SEP])")
        tokens = vocab_path.read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        self.vocab: dict[str, int] = {tok: i for i, tok in enumerate(tokens)}
        self.max_tokens = max_tokens
        self.cls_id = self.vocab["[CLS]"]
        self.sep_id = self.vocab["[SEP]"]
        self.pad_id = self.vocab["[PAD]"]
        self.unk_id = self.vocab["[UNK]"]
        self._longest = max(len(t) for t in tokens)
        self._cache: dict[str, list[int]] = {}

    def _word_ids(self, word: str) -> list[int]:
        """Greedy longest-match-first WordPiece of one word."""
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        ids = self._split_word(word)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[word] = ids
        return ids

    def _split_word(self, word: str) -> list[int]:
        if len(word) > _MAX_WORD_CHARS:
            return [self.unk_id]
        ids: list[int] = []
        start, n = 0, len(word)
        while start < n:
            end = min(n, start + self._longest)
            found: int | None = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return [self.unk_id]
            ids.append(found)
            start = end
        return ids

    def encode(self, text: str) -> list[int]:
        """Token ids of one text with ``[CLS]``/``[SEP]``, at most ``max_tokens``."""
        budget = self.max_tokens - 2
        ids: list[int] = [self.cls_id]
        for word in basic_tokenize(text):
            ids.extend(self._word_ids(word))
            if len(ids) > budget:
                del ids[budget + 1 :]
                break
        ids.append(self.sep_id)
        return ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text (unpadded)."""
        return [self.encode(t) for t in texts]

    def tokenize(self, text: str) -> list[str]:
        """The WordPiece strings of a text (without special tokens), for debugging."""
        inverse = {i: t for t, i in self.vocab.items()}
        return [inverse[i] for i in self.encode(text)[1:-1]]
