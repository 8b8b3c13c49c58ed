"""The one YAML loader of every file nines reads: safe, bounded, and strict about keys.

PyYAML's ``safe_load`` builds no objects, but it still takes three inputs badly:

- aliases: a "billion laughs" document (each anchor a list of ten aliases of the one before) is
  small on disk and shared in memory, but anything that walks it (a validator, a repr, an error
  message) walks every expansion: under a string field it held the probe at gigabytes. Here the
  document's size counted with every alias expanded is capped (:data:`MAX_NODES`), and an alias
  of its own ancestor (a cycle) is refused;
- nesting: the composer recurses, so 3,000 levels raised a 3,000-line RecursionError. Depth is
  counted while scanning (flow and block), while composing (:data:`MAX_DEPTH`) and again through
  aliases;
- duplicate keys: YAML forbids them and PyYAML keeps the last, so a ``probe:`` section written
  twice silently dropped the first. They are refused in every mapping, at any depth.

Each refusal is a ``yaml.YAMLError`` whose first line says what and where (the callers print
that line). Pure: no I/O, imports only PyYAML.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

#: Nodes of a document with every alias expanded: a config has hundreds.
MAX_NODES = 100_000
#: Levels of nesting (a config has fewer than ten).
MAX_DEPTH = 64


class RefusedYaml(yaml.YAMLError):
    """A document over a bound, or with a duplicate key: one line that says which."""


def _where(node: Node) -> str:
    return f"line {node.start_mark.line + 1}, column {node.start_mark.column + 1}"


class _Loader(yaml.SafeLoader):
    """SafeLoader with a depth limit while composing and duplicate keys refused."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def _too_deep(self) -> RefusedYaml:
        mark = self.get_mark()
        where = f"line {mark.line + 1}, column {mark.column + 1}"
        return RefusedYaml(f"nested deeper than {MAX_DEPTH} levels ({where})")

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        """Refuse flow nesting while scanning (the scanner slows down on thousands of ``[``)."""
        if self.flow_level >= MAX_DEPTH:
            raise self._too_deep()
        super().fetch_flow_collection_start(token_class)  # type: ignore[misc]

    def add_indent(self, column: int) -> bool:
        """Refuse block nesting while scanning, as flow nesting."""
        if len(self.indents) >= MAX_DEPTH:
            raise self._too_deep()
        return super().add_indent(column)  # type: ignore[misc, no-any-return]

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        """Compose one node, refusing nesting past :data:`MAX_DEPTH` before recursing deeper."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise self._too_deep()
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A mapping whose keys are all distinct (merge keys ``<<`` aside, which YAML lets the
        mapping's own keys override)."""
        seen: dict[Any, Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:
                continue  # an unhashable key: SafeLoader refuses it with its own message
            if first is not key_node:
                raise RefusedYaml(
                    f"duplicate key {key!r} at {_where(key_node)} (first at {_where(first)})"
                )
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def check_expansion(root: Node) -> None:
    """Refuse a document whose alias-expanded size or depth exceeds the bounds, or that holds
    an alias of its own ancestor; each node is visited once (sizes are memoised)."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    # iterative post-order walk: aliases make depth unbounded in the syntax's terms
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if size[key] > MAX_NODES:
                raise RefusedYaml(
                    f"more than {MAX_NODES:,} values with its aliases expanded "
                    f"(at {_where(node)}): aliases are expanded within a budget"
                )
            if depth[key] > MAX_DEPTH:
                raise RefusedYaml(
                    f"nested deeper than {MAX_DEPTH} levels with its aliases expanded "
                    f"(at {_where(node)})"
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise RefusedYaml(f"an alias of its own ancestor at {_where(node)} (a cycle)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)


def load(text: str) -> Any:
    """The one document in ``text``, within the bounds (``RefusedYaml`` or another
    ``yaml.YAMLError`` otherwise); None for an empty document."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        check_expansion(root)
        return loader.construct_document(root)
    finally:
        loader.dispose()


__all__ = ["MAX_DEPTH", "MAX_NODES", "RefusedYaml", "check_expansion", "load"]
