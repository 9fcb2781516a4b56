"""Offline text analysis: no model, no network, no store.

What extraction and compaction read text with: sentences scored by what they say
(``salience``), events or messages read as turns (``transcript``), an agent's trail of
files, edits, errors and commands (``trail``), and the extractive summarizer that builds
compaction's summaries from them (``extractive``). A leaf: it imports only Loci's basics
(models, time, tokens).
"""

from loci.text.extractive import ExtractiveSummarizer

__all__ = ["ExtractiveSummarizer"]
