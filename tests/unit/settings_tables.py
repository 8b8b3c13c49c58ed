"""docs/configuration.md's probe and stream tables: the key, flag and default columns are generated.

Each row's keys, flags and defaults come from the stage's model (``core.settings``) and its CLI's
``FLAGS``; the meaning column is prose kept in the doc. A model field without a row gets one (its
help line as the meaning); a row naming a key no model has fails. Regenerate after a change:

    PYTHONPATH=$PWD python tests/unit/settings_tables.py --write
"""

from __future__ import annotations

import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"
HEADER = "| key | flag | default | meaning |"


def tables() -> dict[str, tuple[Any, tuple[str, ...]]]:
    """Section → (the model its YAML section is validated by, the fields that are flags)."""
    from monitor.pipeline import PipelineConfig, flags
    from probes.cli import FLAGS as PROBE_FLAGS
    from probes.config import ProbeConfig

    return {"probe": (ProbeConfig, PROBE_FLAGS), "stream": (PipelineConfig, flags())}


def _is_text(annotation: Any) -> bool:
    if annotation is str:
        return True
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return all(isinstance(a, str) for a in args)
    if origin in (tuple, typing.Union, types.UnionType):
        return all(_is_text(a) or a in (Ellipsis, type(None)) for a in args)
    return False


def default_cell(model: Any, key: str) -> str:
    """The default column of ``key``: as users write it, text values in backticks."""
    from core.settings import default_text

    field = model.model_fields[key]
    if field.is_required():
        return "required"
    text = default_text(model, key)
    if text is None:
        return "none"
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    return f"`{text}`" if _is_text(field.annotation) and "default_text" not in extra else text


def render_row(model: Any, flags: tuple[str, ...], keys: list[str], meaning: str) -> str:
    """One table row of ``keys`` (a row may document keys that go together)."""
    from core.settings import flag

    cells = [
        ", ".join(f"`{k}`" for k in keys),
        ", ".join(f"`{flag(k)}`" for k in keys if k in flags),
        ", ".join(default_cell(model, k) for k in keys),
        meaning,
    ]
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"


def _rows(doc: str, section: str) -> tuple[int, int]:
    """Start and end offsets of ``section``'s settings rows (after the header and rule)."""
    at = doc.index(f"\n## {section}\n")
    start = doc.index(HEADER, at)
    start = doc.index("\n", doc.index("\n", start) + 1) + 1
    end = doc.index("\n\n", start) + 1
    return start, end


def render(doc: str) -> str:
    """``doc`` with every generated column of the probe and stream tables rewritten."""
    for section, (model, flags) in tables().items():
        start, end = _rows(doc, section)
        out, seen = [], set()
        for line in doc[start:end].splitlines():
            cells = [c.strip() for c in line.strip()[1:-1].split("|", 3)]
            keys = re.findall(r"`([a-z_0-9]+)`", cells[0])
            unknown = [k for k in keys if k not in model.model_fields]
            if unknown or not keys:
                raise ValueError(f"{section}: no such setting {unknown or cells[0]!r}")
            seen.update(keys)
            out.append(render_row(model, flags, keys, cells[3]))
        for key, field in model.model_fields.items():
            if key not in seen:
                out.append(render_row(model, flags, [key], field.description or ""))
        doc = doc[:start] + "\n".join(out) + "\n" + doc[end:]
    return doc


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    text = DOC.read_text(encoding="utf-8")
    if "--write" in sys.argv:
        DOC.write_text(render(text), encoding="utf-8")
    else:
        print(render(text))
