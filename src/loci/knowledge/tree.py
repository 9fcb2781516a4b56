"""Documents as a folder tree, for ``loci kb ls`` and the dashboard. Pure, no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from loci.models import Document


@dataclass
class Node:
    """A folder (``document`` None) or a document in the tree."""

    name: str
    path: str
    document: Document | None = None
    children: dict[str, Node] = field(default_factory=dict)

    @property
    def is_folder(self) -> bool:
        return self.document is None

    def render(self) -> list[str]:
        """The tree as ``tree``-style lines (see :func:`render_tree`)."""
        return render_tree(self)

    def count(self) -> int:
        """Documents at or below this node."""
        own = 0 if self.document is None else 1
        return own + sum(child.count() for child in self.children.values())


def build_tree(documents: Sequence[Document], root: str = "/") -> Node:
    """The documents below the folder ``root`` (which ends in ``/``) as a tree."""
    top = Node(root, root)
    for document in documents:
        if not document.path.startswith(root):
            continue
        node = top
        parts = document.path[len(root):].split("/")
        for depth, part in enumerate(parts[:-1]):
            folder = root + "/".join(parts[: depth + 1]) + "/"
            node = node.children.setdefault(part + "/", Node(part + "/", folder))
        node.children[parts[-1]] = Node(parts[-1], document.path, document)
    return top


def render_tree(root: Node) -> list[str]:
    """``tree``-style lines: the root, then folders before documents, each sorted."""
    count = root.count()
    lines = [f"{root.path} ({count} document{'' if count == 1 else 's'})"]

    def walk(node: Node, indent: str) -> None:
        children = sorted(node.children.values(), key=lambda n: (not n.is_folder, n.name))
        for i, child in enumerate(children):
            last = i == len(children) - 1
            branch, carry = ("└── ", "    ") if last else ("├── ", "│   ")
            if child.document is None:
                lines.append(f"{indent}{branch}{child.name}")
                walk(child, indent + carry)
            else:
                doc = child.document
                tags = f" [{', '.join(doc.tags)}]" if doc.tags else ""
                lines.append(f"{indent}{branch}{child.name}  v{doc.version}, "
                             f"{len(doc.content):,} chars{tags}")

    walk(root, "")
    return lines
