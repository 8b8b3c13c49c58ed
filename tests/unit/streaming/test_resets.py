"""Offsets that went back (streaming.resets): found from Spark's offsets, the log's ends and the
topic id; where each partition is read from again; the line that says it."""

from __future__ import annotations

from streaming.resets import (
    RESETS,
    TOPIC_ID,
    OffsetsReset,
    is_offset,
    partition_offsets,
    plan,
    read_from,
    reset_partitions,
)


def test_a_new_topic_id_resets_every_partition_read_even_past_its_old_end() -> None:
    start = {"0": 500, "1": 20, "2": 0, TOPIC_ID: "old"}
    found = plan(start, {"0": 900, "1": 3, "2": 7, "3": 4}, "new")
    assert found.recreated and not found.truncated
    # partition 2 was never written and 3 is new: both are read from 0 as they are
    assert found.resets == [OffsetsReset("0", 500, 900, 0), OffsetsReset("1", 20, 3, 0)]
    line = found.line("echoes")
    assert "'echoes'" in line and "[0] 500 -> 900, [1] 20 -> 3" in line
    assert "deleted and recreated (topic id old -> new)" in line and "\n" not in line


def test_the_same_id_and_a_shorter_log_is_a_truncation_read_on_from_the_new_end() -> None:
    found = plan({"0": 500, "1": 40, TOPIC_ID: "x"}, {"0": 450, "1": 40}, "x")
    assert found.truncated and found.resets == [OffsetsReset("0", 500, 450, 450)]
    assert "truncated" in found.line("t") and "unclean leader election" in found.line("t")


def test_without_topic_ids_a_shorter_log_is_read_again_from_its_start() -> None:
    for old_id, new_id in ((None, None), ("x", None), (None, "y")):
        start = {"0": 500, "1": 40, **({TOPIC_ID: old_id} if old_id else {})}
        found = plan(start, {"0": 12, "1": 41}, new_id)
        assert found.resets == [OffsetsReset("0", 500, 12, 0)], (old_id, new_id)
        assert "deleted and recreated, or truncated" in found.line("t")


def test_nothing_went_back_nothing_is_found() -> None:
    assert plan({"0": 5, TOPIC_ID: "x"}, {"0": 5, "1": 9}, "x").resets == []
    assert plan({}, {"0": 5}, "x").resets == []  # the first batch of a checkpoint


def test_the_line_names_a_few_partitions_and_counts_the_rest() -> None:
    start = {str(p): 10 for p in range(20)} | {TOPIC_ID: "a"}
    line = plan(start, {str(p): 0 for p in range(20)}, "b").line("t")
    assert "[7] 10 -> 0 and 12 more" in line and "[8]" not in line


def test_a_batch_reads_reset_partitions_from_where_its_end_offsets_say() -> None:
    start = {"0": 500, "1": 40, TOPIC_ID: "a"}
    end = {"0": 30, "1": 60, "2": 5, TOPIC_ID: "b", RESETS: {"0": 0}}
    assert partition_offsets(end) == {"0": 30, "1": 60, "2": 5}
    assert read_from(start, end) == {"0": 0, "1": 40, "2": 0}
    assert reset_partitions(end) == {0}
    # the next batch starts at that end: its own end carries no reset, so none is counted again
    assert reset_partitions({"0": 31, "1": 60, "2": 5, TOPIC_ID: "b"}) == set()
    assert read_from(end, {"0": 31, "1": 60, "2": 5, TOPIC_ID: "b"}) == {"0": 30, "1": 60, "2": 5}


def test_the_checkpoint_check_knows_the_source_offsets_with_their_id_and_resets() -> None:
    assert is_offset({"0": 5, "1": 0})
    assert is_offset({"0": 5, TOPIC_ID: "a", RESETS: {"0": 0}})
    for other in ({"0": "5"}, {"x": 1}, {TOPIC_ID: 3}, {RESETS: {"0": "a"}}, [1], {"0": True}):
        assert not is_offset(other), other
