"""The pure-Python BERT uncased tokenizer gives the reference tokenizer's ids.

``tokenizer_golden.json`` holds ids produced by the Hugging Face fast tokenizer
(``tokenizers`` 0.23, the ``tokenizer.json`` of sentence-transformers/all-MiniLM-L6-v2,
truncation at 256) for texts that exercise punctuation, accents, CJK, emoji, control
and zero-width characters, over-long words and truncation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loci.embeddings.wordpiece import VOCAB_PATH, WordPieceTokenizer, basic_tokenize

GOLDEN: list[dict[str, Any]] = json.loads(
    (Path(__file__).with_name("tokenizer_golden.json")).read_text(encoding="utf-8")
)


@pytest.fixture(scope="module")
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer()


def test_vocab_is_bert_base_uncased() -> None:
    lines = VOCAB_PATH.read_text(encoding="utf-8").split("\n")
    assert len([t for t in lines if t]) == 30522
    assert lines[:2] == ["[PAD]", "[unused0]"]


@pytest.mark.parametrize("case", GOLDEN, ids=[repr(c["text"][:30]) for c in GOLDEN])
def test_ids_match_reference(tokenizer: WordPieceTokenizer, case: dict[str, Any]) -> None:
    assert tokenizer.encode(case["text"]) == case["ids"]


def test_known_pieces(tokenizer: WordPieceTokenizer) -> None:
    assert tokenizer.tokenize("Unaffable isn't it?") == [
        "una",
        "##ffa",
        "##ble",
        "isn",
        "'",
        "t",
        "it",
        "?",
    ]
    assert basic_tokenize("Café, NAÏVE!") == ["cafe", ",", "naive", "!"]


def test_truncation_keeps_cls_and_sep() -> None:
    short = WordPieceTokenizer(max_tokens=8)
    ids = short.encode("one two three four five six seven eight nine ten")
    assert len(ids) == 8
    assert ids[0] == short.cls_id and ids[-1] == short.sep_id
    assert short.encode("") == [short.cls_id, short.sep_id]


def test_cache_does_not_change_results(tokenizer: WordPieceTokenizer) -> None:
    text = "memory memories memorable memorably"
    assert tokenizer.encode(text) == tokenizer.encode(text)
