"""``python -m bench.combiner --task``: a read task's stages timed on real v2 values."""

from __future__ import annotations

from pathlib import Path

from bench.combiner import TASK_STAGES, main, run_task, task_values


def test_pieces_of_any_size_give_the_same_partials_and_every_stage_is_timed(
    tmp_path: Path,
) -> None:
    values = task_values(6_000, 3)
    assert len(values) == 6  # 1,000 echoes a message, as a probe batches them
    whole, partials = run_task(values, 6, str(tmp_path / "a"), 0, 1 << 30)
    _, in_pieces = run_task(values, 6, str(tmp_path / "b"), 0, 150_000)
    assert set(whole) == set(TASK_STAGES)
    assert partials > 0 and in_pieces == partials
    assert all(s >= 0 for s in whole.values()) and whole["parse"] > 0 and whole["combine"] > 0


def test_the_command_prints_microseconds_per_echo(capsys: object) -> None:
    assert main(["--task", "--echoes", "4000", "--repeat", "1", "--json"]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert '"us_per_echo"' in out and '"parse"' in out
