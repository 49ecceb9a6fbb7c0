"""``VerdictIds``: uuid4-shaped ids drawn in batches; a forked child never repeats its parent's."""

from __future__ import annotations

import os
import uuid

from judgefuse.service.judging.verdict_ids import VerdictIds


def test_ids_are_uuid4_hex_and_distinct_across_batches() -> None:
    ids = VerdictIds(batch=8)
    drawn = [ids.new() for _ in range(1000)]  # 125 refills
    assert len(set(drawn)) == len(drawn)
    for text in drawn:
        value = uuid.UUID(hex=text)
        assert value.hex == text and value.version == 4 and value.variant == uuid.RFC_4122


def test_a_forked_child_draws_a_fresh_batch() -> None:
    ids = VerdictIds(batch=64)
    ids.new()  # the parent holds 63 buffered ids
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id must not be the parent's next buffered one
        try:
            os.write(write, ids.new().encode())
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert len(child) == 32
    assert child != ids.new()
