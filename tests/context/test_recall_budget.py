"""One budget: in a new session the history budget that sits idle goes to recall, which
shows hits while they are worth their tokens (a floor relative to the best hit), brings
the turn that completes each one, and shows them by session and date with who spoke."""

from __future__ import annotations

import re
from pathlib import Path

from loci import Loci
from loci.compaction.summarize import transcript_line
from loci.context.recall import RECALL_RELATIVE_FLOOR
from loci.models import MAX_CAPTIONS, NewEvent, captions
from loci.text.transcript import turns_from_events
from tests.conftest import FakeClock, open_loci

MODEL = {"chat-16k": 16_000}
CHAT: dict[str, object] = {"model": "chat-16k", "models": MODEL, "memory_mirror": False}


def _layer(compiled: object, name: str) -> object:
    return next(r for r in compiled.layers if r.name == name)  # type: ignore[attr-defined]


def test_a_new_session_gives_recall_the_idle_history_budget(home: Path,
                                                            clock: FakeClock) -> None:
    with open_loci(home, clock, **CHAT) as loci:
        for n in range(60):
            clock.advance(days=1)
            loci.add(f"day-{n}", "user", f"Garden log {n}: the tomato bed {n} got "
                     f"{n + 2} litres of water and compost batch {n}. " * 6)
            loci.add_reply(f"day-{n}", f"Noted the tomato bed {n} watering.")
        loci.wait_indexed()
        compiled = loci.compile("new", "How much water did the tomato beds get?")
        recall = _layer(compiled, "recall")
        assert recall.used > 2_000  # type: ignore[attr-defined]  # the old ceiling
        assert recall.budget > 2_000  # type: ignore[attr-defined]
        assert compiled.total_tokens <= compiled.budget
        history = _layer(compiled, "history")
        assert history.used == 0  # type: ignore[attr-defined]  # a new session
        # Once the session has history, what recall shows is sent uncached behind the
        # history the provider caches: its budget is a ceiling again.
        loci.add("new", "user", "How much water did the tomato beds get?")
        loci.add_reply("new", "Let me look at the garden log.")
        ongoing = loci.compile("new", "And which compost batch went to bed 7?")
        recall = _layer(ongoing, "recall")
        assert 0 < recall.used <= recall.budget == 2_000  # type: ignore[attr-defined]
        assert _layer(ongoing, "history").used > 0  # type: ignore[attr-defined]


def test_recall_stops_at_a_floor_relative_to_the_best_hit(home: Path,
                                                          clock: FakeClock) -> None:
    with open_loci(home, clock, **CHAT) as loci:
        loci.add("pets", "user", "My cat is called Miso and she is three years old.")
        loci.add_reply("pets", "Miso is a lovely name for a cat.")
        for n in range(30):
            loci.add(f"other-{n}", "user", f"The quarterly budget review number {n} is due.")
        loci.wait_indexed()
        compiled = loci.compile("new", "What is my cat called?")
        recall = _layer(compiled, "recall")
        scores = [float(m.group(1)) for i in recall.included  # type: ignore[attr-defined]
                  if (m := re.search(r"score ([0-9.]+)", i))]
        assert scores and min(scores) >= RECALL_RELATIVE_FLOOR * max(scores)
        assert "Miso" in compiled.retrieved and "quarterly budget" not in compiled.retrieved


def test_a_recalled_question_brings_its_answer_under_its_session_and_date(
        home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **CHAT) as loci:
        loci.add("travel", "user", "When is the best time to visit Kyoto?")
        loci.add_reply("travel", "Late November: the maple leaves turn red then.")
        clock.advance(days=3)
        loci.add("work", "user", "The best time to visit Kyoto for us is early April.",
                 name="Maya")
        loci.wait_indexed()
        compiled = loci.compile("new", "When is the best time to visit Kyoto?")
        text = compiled.retrieved
        header = "[RECALL session travel, 15 January 2026]"
        assert header in text
        block = text[text.index(header):].split("\n\n")[0].splitlines()
        assert block[1:3] == ["user: When is the best time to visit Kyoto?",
                              "assistant: Late November: the maple leaves turn red then."]
        assert "Maya: The best time to visit Kyoto for us is early April." in text  # by name
        assert text.index(header) < text.index("[RECALL session work")  # time order
        recall = _layer(compiled, "recall")
        events = {e.content: e.id for e in loci.events("travel")}
        for content in ("When is the best time to visit Kyoto?",
                        "Late November: the maple leaves turn red then."):
            assert any(i.startswith(f"event {events[content]} ")
                       for i in recall.included)  # type: ignore[attr-defined]


def test_a_turn_history_shows_is_not_recalled_again(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **CHAT) as loci:
        loci.add("s", "user", "The staging database is on port 5433.")
        loci.add_reply("s", "Noted: staging on 5433.")
        loci.wait_indexed()
        compiled = loci.compile("s", "Which port is the staging database on?")
        assert "5433" not in compiled.retrieved
        assert sum("5433" in str(m["content"]) for m in compiled.history) == 2


def test_a_fact_a_memory_shows_is_not_recalled_again(home: Path, clock: FakeClock) -> None:
    """`loci demo` showed "We decided: … NOAA …" as a MEMORY and again as a RECALL."""
    with open_loci(home, clock, **CHAT) as loci:
        loci.add("kickoff", "user", "We decided: harmonic constituents come from NOAA, and "
                 "predictions are cached for 24 hours.")
        loci.add_reply("kickoff", "Noted.")
        saved = loci.extract_memories(loci.events("kickoff"))
        assert [s.memory.content for s in saved] == [
            "User: We decided: harmonic constituents come from NOAA, and predictions are "
            "cached for 24 hours."]
        loci.wait_indexed()
        compiled = loci.compile("new", "Where do the harmonic constituents come from?")
        assert compiled.to_text().count("harmonic constituents come from NOAA") == 1


def test_a_rewrite_in_the_third_person_is_the_same_fact(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **CHAT) as loci:
        tagged = loci.remember("The user is Maya, a backend engineer in Lisbon.", type="sticky")
        loci.add("s", "user", "I'm Maya, a backend engineer in Lisbon.")
        loci.extract_memories(loci.events("s"))
        assert [m.id for m in loci.memories("sticky")] == [tagged.id]
        assert compiled_stickies(loci) == 1


def compiled_stickies(loci: Loci) -> int:
    return loci.compile(None, "hi").dynamic.count("[STICKY]")


def test_recalled_turns_bring_their_neighbours_read_together(home: Path,
                                                            clock: FakeClock) -> None:
    """A turn's neighbour is the next event of the log but for sessions written turn by
    turn in turns: the neighbours are read together, and only the interleaved ones are
    looked up each on its own."""
    with open_loci(home, clock, **CHAT) as loci:
        for n in range(6):
            loci.add(f"boat-{n}", "user", f"Which anchor suits mooring spot {n}?")
            loci.add_reply(f"boat-{n}", f"A plough anchor holds at mooring spot {n}.")
        loci.add("mixed", "user", "Which anchor suits the sandy mooring spot?")
        loci.add("mixed-other", "user", "An unrelated note about invoices.")
        loci.add_reply("mixed", "A plough anchor holds in sand at the mooring spot.")
        loci.wait_indexed()
        store, apart = loci.store, []
        for name in ("list_events", "tail_events"):
            real = getattr(store, name)

            def counted(*args: object, _real: object = real, **kwargs: object) -> object:
                if kwargs.get("after_id") or kwargs.get("before_id"):
                    apart.append(args[1])
                return _real(*args, **kwargs)  # type: ignore[operator]
            setattr(store, name, counted)
        text = loci.compile("new", "Which anchor suits a mooring spot?").retrieved
        shown = [n for n in range(6) if f"user: Which anchor suits mooring spot {n}?" in text
                 or f"assistant: A plough anchor holds at mooring spot {n}." in text]
        assert len(shown) >= 4
        for n in shown:
            assert f"user: Which anchor suits mooring spot {n}?" in text
            assert f"assistant: A plough anchor holds at mooring spot {n}." in text
        assert "user: Which anchor suits the sandy mooring spot?" in text
        assert "assistant: A plough anchor holds in sand at the mooring spot." in text
        assert apart and set(apart) == {"mixed"}



def test_a_recalled_question_brings_an_answer_that_shares_none_of_its_words(
        home: Path, clock: FakeClock) -> None:
    """Keyword search alone (no embedder): the answer is no hit, only the question's
    neighbour."""
    with open_loci(home, clock, embedding_provider="none", **CHAT) as loci:
        loci.add("cabin", "user", "What is the wifi password at the lake cabin?")
        loci.add_reply("cabin", "Marta keeps it taped inside the pantry: blue-otter-42.")
        for n in range(20):
            loci.add(f"other-{n}", "user", f"Grocery list {n}: apples, rice and soap.")
        compiled = loci.compile("new", "Which wifi password does the lake cabin use?")
        assert "assistant: Marta keeps it taped inside the pantry: blue-otter-42." in (
            compiled.retrieved)
        included = _layer(compiled, "recall").included  # type: ignore[attr-defined]
        assert any("next to event" in i for i in included), included
        assert not any("Grocery" in t for t in compiled.retrieved.splitlines())


def test_a_memory_is_left_out_when_its_own_turn_is_recalled(home: Path,
                                                             clock: FakeClock) -> None:
    """The turn says it in the user's own words: neither a recalled memory nor one of
    the newest repeats it, and a memory whose turn is not shown stays. (The turns' own
    extraction is off: what it saves, whenever its thread runs, would supersede these.)"""
    with open_loci(home, clock, **CHAT, memory_extraction=False) as loci:
        turn = loci.add("kitchen", "user", "My French press ratio is down to a science: one "
                        "tablespoon of coffee for every five ounces of water.")
        loci.add_reply("kitchen", "Five ounces a tablespoon is a classic French press ratio.")
        fact = "The user brews one tablespoon of coffee per five ounces in the French press."
        older = loci.remember(fact, source=f"event:{turn.id}", dedupe=False)
        apart = loci.remember("The user's French press holds four cups of coffee.",
                              source="event:999999", dedupe=False)
        for newer in NEWER_FACTS:
            clock.advance(hours=1)
            loci.remember(newer)
        clock.advance(hours=1)
        newest = loci.remember(NEWEST, source=f"event:{turn.id}", dedupe=False)
        loci.wait_indexed()
        compiled = loci.compile("new", "What is my French press coffee ratio?")
        recall, memories = _layer(compiled, "recall"), _layer(compiled, "memories")
        assert "five ounces of water" in compiled.retrieved  # the turn
        assert fact not in compiled.to_text() and NEWEST not in compiled.to_text()
        cover = f"shown by event {turn.id}"
        assert (older.id, cover) in recall.dropped  # type: ignore[attr-defined]
        assert (newest.id, cover) in memories.dropped  # type: ignore[attr-defined]
        assert newest.id not in memories.included  # type: ignore[attr-defined]
        assert "holds four cups" in compiled.retrieved
        assert apart.id in recall.included  # type: ignore[attr-defined]
        assert NEWER_FACTS[-1] in compiled.dynamic
        # In a session under way, the newest memories stay as they were (cached).
        loci.add("new", "user", "What is my French press coffee ratio?")
        loci.add_reply("new", "One tablespoon to five ounces.")
        ongoing = loci.compile("new", "And how do I clean it?")
        assert NEWEST in ongoing.dynamic


NEWEST = "The user's French press ratio: one tablespoon of coffee for five ounces of water."
NEWER_FACTS = [
    "The user's sister lives in Porto.", "The user plays padel on Thursdays.",
    "The user's car is a green hatchback.", "The user is allergic to penicillin.",
    "The user reads science fiction at night.", "The user volunteers at an animal shelter.",
    "The user's favourite band is Radiohead.", "The user studied geology in Leeds.",
    "The user keeps a sourdough starter called Bob.", "The user runs a half marathon yearly.",
    "The user's office is on the ninth floor.", "The user collects vintage postcards.",
]


def test_what_a_turn_shared_is_shown_with_it(home: Path, clock: FakeClock) -> None:
    """A photo is only its caption to a model that never saw it: history, recall and
    what compaction summarizes show it, and the event's tokens count it."""
    with open_loci(home, clock, **CHAT) as loci:
        plain = loci.add("pottery", "user", "The kids made this at the clay workshop!")
        shown = loci.add("pottery", "user", "The kids made this at the clay workshop!",
                         caption="a photo of a cup with a dog face on it",
                         attachments=[{"alt": "a second cup, glazed blue"}])
        assert shown.tokens > plain.tokens
        loci.add_reply("pottery", "What a lovely cup!")
        history = loci.compile("pottery", "What did they make?").history
        assert history[1]["content"] == (
            "The kids made this at the clay workshop! (shared: a photo of a cup with a dog "
            "face on it; a second cup, glazed blue)")
        photo = "(shared: a photo of a cup with a dog face on it; a second cup, glazed blue)"
        assert photo in transcript_line(loci.events("pottery")[1])  # what a model summarizes
        assert [t.text for t in turns_from_events(loci.events("pottery"))][1].endswith(photo)
        loci.wait_indexed()
        recalled = loci.compile("new", "What did the kids make with clay, a cup?").retrieved
        assert "user: The kids made this at the clay workshop! (shared: a photo of a cup " \
               "with a dog face on it; a second cup, glazed blue)" in recalled


def test_what_a_long_turn_shared_is_shortened_with_it(home: Path, clock: FakeClock) -> None:
    """A turn too long for history is shown head and tail, what it shared within them
    (not added again whole), and the context stays within its budget."""
    with open_loci(home, clock, **CHAT) as loci:
        many = [{"alt": f"photo {n}: " + "a harbour at dusk " * 25} for n in range(40)]
        loci.add("s", "user", "log " * 30_000, attachments=many)
        compiled = loci.compile("s", "What did I share?")
        (message,) = compiled.history
        content = str(message["content"])
        assert compiled.total_tokens <= compiled.budget
        assert "characters left out here" in content
        assert content.endswith("a harbour at dusk)")  # the tail of what it shared
        assert content.count("photo ") < MAX_CAPTIONS  # not all of it again after the tail
        assert len(captions({"attachments": many})) == MAX_CAPTIONS


def test_a_memory_changed_since_its_turn_is_shown_beside_it(home: Path,
                                                           clock: FakeClock) -> None:
    """The turn no longer says it: "lives in Berlin now", taken from "I live in Paris"
    and changed, is shown with the turn, in history and when recalled."""
    with open_loci(home, clock, **CHAT, memory_extraction=False) as loci:
        turn = loci.add("s", "user", "By the way, I live in Paris near the river.")
        loci.add_reply("s", "Noted.")
        taken = loci.remember("The user lives in Paris near the river.",
                              source=f"event:{turn.id}")
        assert "lives in Paris" not in loci.compile("s", "Where do I live?").dynamic
        loci.memory_write(taken.type, list(taken.tags),
                          "The user lives in Berlin now, having moved from Paris.", id=taken.id)
        loci.wait_indexed()
        assert "lives in Berlin now" in loci.compile("s", "Where do I live?").dynamic
        fresh = loci.compile("new", "Is the river near where I live?")
        assert "I live in Paris near the river" in fresh.retrieved
        assert "lives in Berlin now" in fresh.to_text()


def test_what_a_turn_stored_earlier_shared_is_counted_when_shown(
        home: Path, clock: FakeClock) -> None:
    """A turn stored before what it shared was counted in its tokens: history counts
    what it shows, and the context stays within its budget."""
    with open_loci(home, clock, **CHAT) as loci:
        photos = [f"{n}: a harbour at dusk with boats, a pier and gulls " * 8 for n in range(20)]
        loci.store.append_events(loci.scope, "s", [
            NewEvent("message", role, f"look {n}", clock.now, tokens=7,
                     metadata={"caption": photos} if role == "user" else {})
            for n in range(8) for role in ("user", "assistant")])
        for window in (2_000, 8_000):
            compiled = loci.compile("s", "And?", window=window)
            sent = sum(loci.counter.count_message(str(m["role"]), str(m["content"]))
                       for m in compiled.history)
            assert sent <= compiled.budget
            assert "(shared: 0: a harbour" in str(compiled.history[-2]["content"])


def test_a_long_turn_in_a_dense_script_is_shortened_within_the_budget(
        home: Path, clock: FakeClock) -> None:
    """Shortening estimates a text's tokens from its own density: Chinese runs about a
    character a token, not four."""
    with open_loci(home, clock, **CHAT) as loci:
        for n in range(6):
            loci.add("s", "user", f"{n} " + "照片显示黄昏时的小港口渔船停靠在码头旁边" * 400)
            loci.add_reply("s", f"{n} " + "景色非常美丽" * 400)
        for window in (512, 1_000, 4_000):
            compiled = loci.compile("s", "And?", window=window)
            sent = sum(loci.counter.count_message(str(m["role"]), str(m["content"]))
                       for m in compiled.history)
            assert "characters left out here" in str(compiled.history[-1]["content"])
            assert sent <= compiled.budget
