"""REST routes for the knowledge base (documents at paths, with versions, a tree and
search) and for the workspace's skills."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from loci import Document, DocumentPage, DocumentSummary, DocumentVersion, Node
from loci.server.deps import Engine, hub_of
from loci.server.routing import JSONRoute, json_response

router = APIRouter(route_class=JSONRoute)


class DocumentIn(BaseModel):
    content: str
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    #: The content SHA-256 the writer last saw ("" for no document).
    expected_sha256: str | None = None


class KnowledgeSearchIn(BaseModel):
    """``search_knowledge``."""

    query: str
    path_filter: str | None = None
    tags: list[str] = Field(default_factory=list)
    top_k: int = Field(5, ge=1, le=100)


class SkillMatchIn(BaseModel):
    text: str


def _tagged(response: Response, document: Document) -> Response:
    response.headers["ETag"] = f'"{document.sha256}"'
    return response


def _summary(document: Document) -> dict[str, Any]:
    return {"path": document.path, "version": document.version, "tags": document.tags,
            "chars": len(document.content), "updated_at": document.updated_at}


def _tree(node: Node) -> dict[str, Any]:
    if not node.is_folder:
        assert node.document is not None
        return {"name": node.name, **_summary(node.document)}
    return {"name": node.name, "path": node.path, "count": node.count(),
            "children": [_tree(child) for _, child in sorted(node.children.items())]}


@router.get("/kb", response_model=None, tags=["knowledge"])
def list_documents(loci: Engine, prefix: str = "/") -> list[dict[str, Any]]:
    """Documents in the folder ``prefix`` and below (no content)."""
    return [_summary(d) for d in loci.knowledge.ls(prefix)]


@router.get("/kb/tree", response_model=None, tags=["knowledge"])
def document_tree(loci: Engine, prefix: str = "/") -> dict[str, Any]:
    return _tree(loci.knowledge.tree(prefix))


@router.get("/kb/doc", response_model=None, tags=["knowledge"])
def get_document(loci: Engine, path: str, version: int | None = None) -> Response:
    """A document; its ``ETag`` is its content's SHA-256, for ``If-Match``."""
    document = loci.knowledge.get(path, version)
    return _tagged(json_response(document), document)


@router.put("/kb/doc", response_model=None, tags=["knowledge"])
def put_document(loci: Engine, path: str, body: DocumentIn,
                 if_match: Annotated[str | None, Header()] = None) -> Response:
    """Create the document at ``path`` or write its next version. ``If-Match`` with
    the ``ETag`` read (or ``expected_sha256``) refuses to replace a newer version: 409."""
    expected = body.expected_sha256
    if if_match is not None:
        expected = "" if if_match.strip() == '""' else if_match.strip().strip('"')
    result = loci.knowledge.put(path, body.content, body.tags, body.metadata,
                                expected_sha256=expected)
    response = json_response({"status": result.status, "document": result.document})
    return _tagged(response, result.document)


@router.delete("/kb/doc", status_code=204, tags=["knowledge"])
def delete_document(loci: Engine, path: str) -> Response:
    loci.knowledge.rm(path)
    return Response(status_code=204)


@router.get("/kb/history", response_model=None, tags=["knowledge"])
def document_history(loci: Engine, path: str) -> list[DocumentVersion]:
    return loci.knowledge.history(path)


@router.delete("/kb/history", response_model=None, tags=["knowledge"])
def redact_version(loci: Engine, path: str, version: int) -> DocumentVersion:
    """Redact an earlier version: its text and tags are emptied, the version stays in
    the history (``metadata.redacted_at``)."""
    return loci.knowledge.redact(path, version)


@router.get("/kb/read", response_model=None, tags=["knowledge"])
def read_document(
    loci: Engine, path: str, offset: int = Query(0, ge=0),
    limit: int = Query(10_000, ge=1, le=1_000_000),
) -> DocumentPage:
    """``read_document``: the latest version, page by page."""
    return loci.read_document(path, offset, limit)


@router.post("/kb/search", response_model=None, tags=["knowledge"])
async def search_knowledge(request: Request, loci: Engine, body: KnowledgeSearchIn
                           ) -> list[DocumentSummary]:
    return await hub_of(request).run(lambda: loci.search_knowledge(
        body.query, body.path_filter, body.tags, body.top_k))


@router.get("/skills", response_model=None, tags=["skills"])
def list_skills(loci: Engine) -> dict[str, Any]:
    found = loci.workspace().skills()
    return {"skills": [{"slug": s.slug, "name": s.skill.name, "description": s.description,
                        "keywords": s.skill.keywords, "patterns": s.skill.patterns}
                       for s in found.skills],
            "issues": [{"path": str(i.path), "reason": i.reason} for i in found.issues]}


@router.post("/skills/match", response_model=None, tags=["skills"])
def match(loci: Engine, body: SkillMatchIn) -> list[dict[str, Any]]:
    """Score every skill against the text (keyword matches + pattern matches)."""
    return [{"slug": s.slug, "name": s.skill.name, "score": score}
            for s, score in loci.workspace().match_skills(body.text)]
