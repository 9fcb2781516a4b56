"""``POST /v1/responses/compact``, answered by Loci's own compaction.

OpenAI's endpoint returns the conversation's user messages followed by one opaque
``compaction`` item that stands for the rest. Here the session's log is the
conversation: a new session first takes the client's earlier messages (as every proxy
face does), then Loci compacts it (masks old tool outputs, saves facts to memory,
summarizes and archives the oldest span: nothing is deleted). The compaction item only
names that session state; sent back in a later ``/v1/responses`` input it is skipped,
because the log already holds what it stands for.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from typing import Annotated, Any

from fastapi import APIRouter, Header
from pydantic import Field, field_validator

from loci import Asked, Exchange, ValidationError
from loci.apis.shapes import ResponsesCompaction
from loci.apis.wire import JSONObject
from loci.server.hub import header_text
from loci.server.proxy import Engine
from loci.server.proxy_requests import RESPONSES_ITEMS, FaceRequest, checked
from loci.server.proxy_responses import ResponsesRequest

router = APIRouter(tags=["proxy"])


class CompactRequest(FaceRequest):
    """A ``responses.compact`` request (``proxy_requests``); fields Loci does not use
    are accepted."""

    model: str = Field(min_length=1)
    input: str | list[JSONObject] | None = None
    instructions: str | None = None
    user: str | None = None

    @field_validator("input")
    @classmethod
    def _input(cls, value: Any) -> Any:
        return checked(RESPONSES_ITEMS, value, "input") if isinstance(value, list) else value


@router.post("/responses/compact", response_model=None)
def compact(
    loci: Engine, body: CompactRequest,
    x_loci_session: Annotated[str | None, Header()] = None,
) -> ResponsesCompaction:
    """Compact the session now; its user messages and one compaction item come back."""
    session = header_text(x_loci_session) or body.user
    if not session:
        raise ValidationError("name the session: send the header 'X-Loci-Session: <name>'")
    if body.input:
        asked = ResponsesRequest.model_validate({"model": body.model,
                                                 "input": body.input}).asked()
    else:
        asked = Asked(body.model, [], {})
    result = Exchange.compact(loci, session, asked)
    record = result.record.id if result.record is not None else None
    summary = loci.counter.count(result.summary)
    token = json.dumps({"loci_session": session, "compaction": record})
    users: list[JSONObject] = [{"id": f"msg_loci_{e.id}", "type": "message", "role": "user",
              "status": "completed", "content": [{"type": "input_text", "text": e.content}]}
             for e in loci.events(session, include_archived=True)
             if e.type == "message" and e.role == "user"]
    item: JSONObject = {"id": f"cmp_loci_{secrets.token_hex(8)}", "type": "compaction",
            "encrypted_content": base64.b64encode(token.encode()).decode(),
            "created_by": "loci"}
    return {"id": f"resp_loci_{secrets.token_hex(12)}", "object": "response.compaction",
            "created_at": int(time.time()), "output": [*users, item],
            "usage": {"input_tokens": result.tokens_before, "output_tokens": summary,
                      "total_tokens": result.tokens_before + summary,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}
