import json

import pytest

from loci import ValidationError
from loci.eventlog import parse_jsonl, to_record
from loci.models import Event
from loci.timeutil import parse_timestamp
from loci.tokens import token_counter

COUNTER = token_counter("gpt-4.1")
T = parse_timestamp("2024-01-01T00:00:00Z")
SEED_LINES = [
    '{"type":"message","role":"user","content":"Hello","timestamp":"2024-01-01T00:00:00Z"}',
    '{"type":"message","role":"assistant","content":"Hi there!",'
    '"timestamp":"2024-01-01T00:00:01Z"}',
    '{"type":"tool_call","toolName":"read","args":{"path":"a.txt"},"timestamp":"2024-01-01T00:00:02Z"}',
    '{"type":"tool_result","toolCallId":"tc_123","result":"...","timestamp":"2024-01-01T00:00:03Z"}',
]


def test_parses_the_seed_format() -> None:
    events = parse_jsonl(SEED_LINES, COUNTER, T)
    assert [(e.type, e.role) for e in events] == [
        ("message", "user"), ("message", "assistant"), ("tool_call", "assistant"),
        ("tool_result", "tool")]
    assert events[2].args == {"path": "a.txt"} and events[2].tool_name == "read"
    assert events[3].content == "..." and events[3].tool_call_id == "tc_123"
    assert all(e.tokens > 0 for e in events)


def test_records_round_trip() -> None:
    for line, new in zip(SEED_LINES, parse_jsonl(SEED_LINES, COUNTER, T), strict=True):
        event = Event(id=1, session="s", type=new.type, role=new.role, content=new.content,
                      timestamp=new.timestamp, tokens=new.tokens, tool_name=new.tool_name,
                      tool_call_id=new.tool_call_id, args=new.args, metadata=new.metadata)
        assert to_record(event) == json.loads(line)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"type":"message","role":"wizard","content":"x"}', "line 2: unknown role 'wizard'"),
        ('{"type":"message","role":"user",', "line 2: malformed JSON"),
        ('{"type":"telepathy","content":"x"}', "line 2: unknown event type"),
        ('["not", "an", "object"]', "line 2: expected a JSON object"),
        ('{"type":"message","role":"user","content":"x","timestamp":"noon"}', "line 2: not an ISO"),
        ('{"type":"tool_call","args":{}}', "line 2: a tool_call needs a tool name"),
        ('{"type":"tool_call","toolName":"t","args":[1]}', "line 2: args must be an object"),
        ('{"role":"user","content":"x","archived":"yes"}', "line 2: archived must be true"),
    ],
)
def test_bad_lines_name_their_number(line: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(")):
        parse_jsonl([SEED_LINES[0], line, SEED_LINES[1]], COUNTER, T)


def test_blank_lines_are_skipped_and_missing_timestamps_default() -> None:
    events = parse_jsonl(["", '{"role":"user","content":"x"}', "   "], COUNTER, T)
    assert len(events) == 1 and events[0].timestamp == T and events[0].type == "message"
