"""``stashbird bench scale`` at a tiny size on a database of its own: it must run both
steps and print figures that add up (counts, shares, sizes, the checks it makes); the
latencies are not judged here, only that they were taken."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from bot.cli import build_parser
from bot.settings import DatabaseSettings, Settings
from lab.bench.common import busy_ms, cpu_times, disk_reads_kb, steal_share, warm_page_cache
from lab.bench.scale import band_members, band_of, sizes, steps, vocabulary
from lab.probes import byte_groups, grow_conversations, recall_at
from memory import ConversationRef, Memory, Principal, ValidationError, ingest, resolve_conversation, validate_message
from memory.store.vector_indexes import TEXT, index_name


def test_sizes_follow_the_skew_add_up_and_only_grow() -> None:
    small, large = sizes(1_000, 10, 1.0), sizes(10_000, 10, 1.0)
    assert sum(small) == 1_000 and sum(large) == 10_000
    assert small == sorted(small, reverse=True) and all(a <= b for a, b in zip(small, large, strict=True))
    assert sizes(100, 10, 0.0) == [10] * 10
    assert min(sizes(20, 20, 2.0)) == 1  # every conversation holds a message


def test_size_bands_take_conversations_from_largest_to_smallest() -> None:
    have = [150_000, 40_000, 30_000, 25_000, 21_000, 5_000, 1_999, 10, 1]
    assert [band_of(n) for n in (0, 1_999, 2_000, 20_000, 99_999, 100_000)] == [
        "under 2K",
        "under 2K",
        "2K-20K",
        "20K-100K",
        "20K-100K",
        "100K and more",
    ]
    assert band_members(have, 3) == {"100K and more": [0], "20K-100K": [1, 3, 4], "2K-20K": [5], "under 2K": [6, 7, 8]}


def test_recall_counts_a_row_tied_with_the_kth_as_found() -> None:
    exact = [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.3)]
    assert recall_at(exact, [(1, 0.1), (2, 0.2), (4, 0.3)], 3) == 1.0  # 4 is as near as 3
    assert recall_at(exact, [(1, 0.1), (9, 0.35), (8, 0.4)], 3) == pytest.approx(1 / 3)
    assert recall_at(exact, [(5, 0.1), (6, 0.1), (7, 0.1), (8, 0.1)], 3) == 1.0  # never above 1
    assert recall_at([], [(1, 0.1)], 3) == 1.0 and recall_at(exact, [], 3) == 0.0


def test_steps_end_at_the_messages_and_hold_a_message_per_conversation() -> None:
    assert steps(1_000_000, 1_000, "") == [10_000, 100_000, 1_000_000]
    assert steps(20_000, 1_000, "") == [10_000, 20_000]
    assert steps(500, 5, "100,50,900") == [50, 100, 500]
    with pytest.raises(ValidationError, match="one message per conversation"):
        steps(2_000, 1_000, "500")
    with pytest.raises(ValidationError, match="not a list"):
        steps(2_000, 10, "ten")
    assert len(set(vocabulary())) == len(vocabulary()) == 4_096


@pytest.mark.usefixtures("declared_plugins")
async def test_bench_scale_runs_and_its_figures_add_up(new_database) -> None:
    argv = ["bench", "scale", "--conversations", "6", "--messages", "240", "--steps", "60"]
    argv += ["--queries", "6", "--deletes", "6", "--ingested", "4", "--index-memory-mb", "64", "--band-queries", "3"]
    args = build_parser(argv).parse_args(argv)
    settings = Settings(database=DatabaseSettings(url=new_database()))
    result = await args.module.run(args, settings)
    first, last = result["steps"]
    assert result["bench"] == "scale" and result["conversations"] == 6
    # Stored: loaded plus ingested, less what earlier steps deleted.
    assert first["messages"] == 60 + 4
    assert last["messages"] == 240 + 8 - first["delete"]["deleted_total"]
    assert last["largest_conversation"] == sizes(240, 6, 1.0)[0]
    assert first["bulk"]["messages"] == 60 and last["bulk"]["messages"] == 180
    assert last["real_share"] == pytest.approx(8 / last["messages"], abs=1e-6)
    for step in (first, last):
        assert step["bulk"]["per_second"] > 0 and step["ingest"]["per_second"] > 0
        assert step["bytes"] > 0 and step["bytes_per_million"] == int(step["bytes"] / step["messages"] * 1e6)
        parts = step["bytes_by"]  # within the database's size, which adds the catalogue's
        assert parts["table search_documents"] > 0 and parts["table episodes"] > 0 and parts["index uq_search_document_ref"] > 0
        assert 0 < sum(parts.values()) < step["bytes"] and list(parts.values()) == sorted(parts.values(), reverse=True)
        assert not [n for n in parts if re.search(r"search_documents_p\d", n)]  # partitions under their table (0024)
        assert step["index_seconds"] is None  # one server: no shared vector index to build
        assert step["rss_mb"] > 0 and step["peak_rss_mb"] >= step["rss_mb"] - 1
        assert step["search"]["empty"] == 0 and step["delete"]["wrong"] == 0 and step["ingest"]["unsearchable"] == 0
        assert step["search"]["all"]["count"] == 6
        (band,) = step["bands"].values()  # every conversation under 2K messages: scanned exactly
        assert band["queries"] == 3 and band["recall_at_30"] == {} and 0 < band["planning_share"] < 1
        assert 0 < step["delete"]["all"]["count"] <= 6
        for figures in (step["search"]["largest"], step["search"]["random"], step["delete"]["all"]):
            assert 0 < figures["median_ms"] <= figures["p99_ms"]
        assert step["shards"] is None  # the embedded server: no Citus
        assert step["steal"] is None or 0 <= step["steal"] <= 1
        # Every timed search's CPU: this process's own is never zero, the machine's is
        # counted in 10 ms ticks (0 for a handful of searches on an idle machine).
        cpu = step["search"]["cpu_ms"]
        assert set(cpu) == {"largest", "random"} and all(c["client"] > 0 and c["machine"] >= 0 for c in cpu.values())
        # The embedded server's files are on this machine: read before the timing.
        assert step["warmed"]["folders"] == step["warmed"]["read_here"] == 1 and step["warmed"]["mb"] > 0
        assert step["disk_read_mb"] is None or step["disk_read_mb"] >= 0
    assert "exact episode" in first["search"]["plan"]  # 60 messages: scanned exactly
    text = args.module.render(result)
    assert f"{last['messages']:>9}" in text and "targets p99 <= 25 ms at 1M" in text
    largest = last["search"]["cpu_ms"]["largest"]
    assert f"largest {largest['machine']} ms ({largest['client']})" in text

    # Measured again without loading: the same store, its last step only; a message the
    # first run deleted and the second draws again is not timed.
    again = build_parser([*argv, "--reuse", "--cold"]).parse_args([*argv, "--reuse", "--cold"])
    (step,) = (await again.module.run(again, settings))["steps"]
    assert step["bulk"]["messages"] == 0 and step["index_seconds"] is None
    assert step["warmed"] is None and "not read first (--cold)" in again.module.render({**result, "steps": [step]})
    last_deleted = last["delete"]["deleted_total"] - first["delete"]["deleted_total"]
    assert step["messages"] == last["messages"] - last_deleted + 4
    assert step["search"]["empty"] == 0 and step["delete"]["wrong"] == 0 and step["ingest"]["unsearchable"] == 0


OPERATOR = Principal.operator("test")
_LINKS = text("SELECT id, prev_id, next_id FROM episodes WHERE conversation_id = :c ORDER BY message_time, id")


async def test_grown_conversations_are_chained_in_time_order(memory: Memory) -> None:
    """The loader writes each message with its links among the new ones and then mends
    the edges: grown twice around a message ingested in between, every conversation's
    chain still runs through all its messages in time order."""
    run = uuid.uuid4().hex[:6]
    grown, other = ConversationRef("chain-test", run, "grown"), ConversationRef("chain-test", run, "other")
    await grow_conversations(memory, [(grown, 0, 30), (other, 0, 20)], ("ka", "lo"))
    late = {"id": "late", "author": "Speaker 1", "text": "after the bulk", "ts": datetime(2027, 1, 1, tzinfo=UTC)}
    await ingest(memory, grown, [validate_message(late)], principal=OPERATOR)
    await grow_conversations(memory, [(grown, 30, 25), (other, 20, 1)], ("ka", "lo"))
    for ref, count in ((grown, 56), (other, 21)):
        conversation_id = await resolve_conversation(memory, ref, principal=OPERATOR)
        async with memory._engine.connect() as connection:
            rows = (await connection.execute(_LINKS, {"c": conversation_id})).all()
        ids = [row.id for row in rows]
        assert len(ids) == count
        assert [row.prev_id for row in rows] == [None, *ids[:-1]]
        assert [row.next_id for row in rows] == [*ids[1:], None]


@pytest.mark.usefixtures("declared_plugins")
async def test_distributing_after_the_load_needs_citus(new_database) -> None:
    argv = ["bench", "scale", "--conversations", "2", "--messages", "20", "--distribute-after"]
    args = build_parser(argv).parse_args(argv)
    with pytest.raises(ValidationError, match="--distribute-after"):
        await args.module.run(args, Settings(database=DatabaseSettings(url=new_database())))


def test_warming_reads_every_file_of_the_folders_on_this_machine(tmp_path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a").write_bytes(b"x" * 3_000_000)
    (tmp_path / "sub" / "b").write_bytes(b"y" * 500_000)
    warmed = warm_page_cache([str(tmp_path), str(tmp_path / "elsewhere")])
    assert warmed["folders"] == 2 and warmed["read_here"] == 1 and warmed["mb"] == 3.5
    reads = disk_reads_kb()
    assert reads is None or reads >= 0


def test_steal_share_reads_the_steal_counter_of_the_interval() -> None:
    before = (100, 0, 50, 800, 10, 0, 5, 35, 0, 0)
    after = (160, 0, 70, 900, 10, 0, 5, 55, 7, 0)  # guest time (7) is already in user
    assert steal_share(before, after) == pytest.approx(20 / 200)
    assert steal_share(before, before) == 0.0
    assert steal_share(None, after) is None and steal_share(before[:4], after[:4]) is None
    # On Linux the machine's own counters are read, and they only grow.
    first, second = cpu_times(), cpu_times()
    if first is not None and second is not None:
        assert len(first) >= 8 and all(b >= a for a, b in zip(first, second, strict=True))


def test_busy_time_is_the_machines_cpu_time_less_idle_iowait_and_steal() -> None:
    before = (100, 0, 50, 800, 10, 0, 5, 35, 0, 0)
    after = (160, 4, 70, 900, 30, 1, 7, 55, 7, 0)  # user 60, nice 4, system 20, irq 1, softirq 2
    assert busy_ms(before, after, ticks=100) == pytest.approx(870.0)
    assert busy_ms(before, before, ticks=100) == 0.0
    assert busy_ms(None, after) is None and busy_ms(before[:4], after[:4]) is None


def test_the_bytes_of_the_conversations_own_indexes_are_added_up_by_kind() -> None:
    """Pure: hundreds of own indexes are two lines, every other index and table its own."""
    tables = [("episodes", 50), ("search_documents", 70)]
    indexes = [(index_name(1, "episode"), 30), (index_name(2, "entity"), 12), (index_name(1, TEXT), 5), ("ix_episodes_prev", 5)]
    assert byte_groups(tables, indexes) == {
        "table search_documents": 70,
        "table episodes": 50,
        "index own vector": 42,
        "index ix_episodes_prev": 5,
        "index own text": 5,
    }
