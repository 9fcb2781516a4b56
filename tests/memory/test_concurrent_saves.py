"""Processes that save the same facts at once keep one memory per fact: the duplicate
check and the write of a save are one step for every process (``Store.saving``)."""

from __future__ import annotations

from pathlib import Path

from loci import Loci
from tests.at_once import run_at_once

FACTS = [
    "The user lives in Lisbon", "The user's sister Ana is a nurse",
    "The user drives a blue Volvo", "The user is allergic to peanuts",
    "The user plays the cello on Sundays", "The user's dog is called Biscuit",
    "The user works as a data engineer", "The user prefers tea over coffee",
    "The user runs five kilometres before work", "The user speaks Portuguese and Dutch",
    "The user's team deploys on Fridays", "The user grows tomatoes on the balcony",
    "The user reads science fiction at night", "The user was born in Porto",
    "The user keeps bees in the garden", "The user's favourite film is Alien",
]
CHILD = """
from loci import Loci
url, home, *facts = sys.argv[3:]
with Loci.open(store=url, home=home, embedding_provider="hash", memory_mirror=False,
               memory_extraction=False) as loci:
    loci.remember("warm-up fact of this process", type="sticky")
    wait_for_go()
    for fact in facts:
        loci.remember(fact, type="sticky")
"""


def test_processes_saving_one_fact_keep_one_memory(store_url: str, tmp_path: Path) -> None:
    run_at_once(CHILD, [[store_url, str(tmp_path / f"home{n}"), *FACTS] for n in range(4)],
                tmp_path)
    with Loci.open(store=store_url, home=str(tmp_path / "reader"), embedding_provider="hash",
                   memory_mirror=False) as loci:
        kept = [m.content for m in loci.memories()]
    assert sorted(kept) == sorted({*FACTS, "warm-up fact of this process"})
