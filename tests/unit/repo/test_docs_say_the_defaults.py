"""The docs name the default echo format the code has (docs/echo-format.md said v1 after the
default became v2, and README's picture did too)."""

from __future__ import annotations

from pathlib import Path

from probes.config import ProbeConfig

ROOT = Path(__file__).resolve().parents[3]


def test_echo_format_docs_name_the_codes_default() -> None:
    default = ProbeConfig.model_fields["echo_format"].default
    names = {"v1": "schema v1", "v2": "format v2"}
    doc = (ROOT / "docs" / "echo-format.md").read_text()
    assert f"**{names[default]}** (the default)" in doc
    assert f"**The default is {default}.**" in doc
    other = next(n for k, n in names.items() if k != default)
    assert f"**{other}** (the default)" not in doc
    readme = (ROOT / "README.md").read_text()
    picture = readme[readme.index("## How it works") :].split("```")[1]
    assert names[default] in picture and other not in picture
