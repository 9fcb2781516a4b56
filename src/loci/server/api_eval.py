"""REST route of ``loci eval``, for the dashboard's page: a stored session of the
caller's scope replayed into a scratch store (``loci.evaluation``), one report per
window. The replay compiles a context before every model call of the session, so the
route is a sync one (it runs in the thread pool), the replays run in a child process
(``evaluate(apart=True)``: the server keeps neither their memory nor their hold on the
interpreter), and the work is bounded: a few windows, a few points, one replay at a time
in a server process. The stored session is only read."""

from __future__ import annotations

import threading
from typing import Any

from fastapi import APIRouter, Query
from starlette.exceptions import HTTPException

from loci import ValidationError
from loci.evaluation import BASELINES, CLASSES, CUTS, checked, evaluate, numbers
from loci.server.deps import Engine
from loci.server.routing import JSONRoute

router = APIRouter(tags=["sessions"], route_class=JSONRoute)

#: Each window is one more replay of the whole session.
MAX_WINDOWS = 3
#: Each point is one more compile, and the last one a search per missed artifact.
MAX_POINTS = 10
#: As the context route's window override.
MAX_WINDOW = 10_000_000
#: Held while a replay runs: a second one at once would halve the CPU of both and of
#: every other request; it is refused (429) instead.
ONE_REPLAY = threading.Lock()


@router.get("/sessions/{session:path}/eval", response_model=None)
def evaluate_session(
    loci: Engine, session: str,
    windows: str = Query("32000", description="context windows in tokens, comma-separated "
                         f"(at most {MAX_WINDOWS})"),
    points: str = Query(",".join(map(str, CUTS)), description="points of the session, "
                        f"fractions of its messages in (0, 1], comma-separated (at most "
                        f"{MAX_POINTS})"),
) -> dict[str, Any]:
    """Replay the session step by step as its agent saw it and report, per window and
    at each point, the share of the agent's trail (files, commands, errors, edits, the
    task) the compiled context holds, against the recency tail at the same tokens and
    at the history budget; at the last point, which misses ``search_conversation``
    finds."""
    # Checked here as well as by evaluate: bad input is refused even while busy.
    sizes, cuts = checked(numbers(windows, int, "windows"), numbers(points, float, "points"))
    if len(sizes) > MAX_WINDOWS:
        raise ValidationError(f"windows: at most {MAX_WINDOWS} at once")
    if len(cuts) > MAX_POINTS:
        raise ValidationError(f"points: at most {MAX_POINTS} at once")
    if any(size > MAX_WINDOW for size in sizes):
        raise ValidationError(f"windows: at most {MAX_WINDOW:,} tokens")
    if not ONE_REPLAY.acquire(blocking=False):
        raise HTTPException(429, "a session is being replayed on this server already; "
                                 "try again when it is done")
    try:
        reports = evaluate(loci, session, sizes, cuts, apart=True)
    finally:
        ONE_REPLAY.release()
    return {"session": session, "classes": list(CLASSES), "baselines": list(BASELINES),
            "reports": reports}
