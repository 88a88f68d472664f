"""Units of the server's bounds: the scheduler's bounded wait and released slots, the
connection cap, the accept-error log, and what `describe` says about the model."""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import time

import pytest

from wyoming_pocket_tts.server.connections import (
    RESERVED_FILES,
    AcceptErrorLog,
    address_share,
    client_address,
    connection_cap,
)
from wyoming_pocket_tts.server.info import build_info
from wyoming_pocket_tts.server.scheduler import Priority, SlotBusy, SynthesisScheduler


def test_slot_wait_is_bounded_and_the_refused_waiter_leaves_the_queue():
    async def go():
        scheduler = SynthesisScheduler(1)
        gate = asyncio.Event()

        async def holder():
            async with scheduler.slot():
                await gate.wait()

        hold = asyncio.create_task(holder())
        await asyncio.sleep(0)
        with pytest.raises(SlotBusy, match=r"within 0.1 s \(1 running, 0 other"):
            async with scheduler.slot(Priority.NEW, max_wait=0.1):
                pass
        waiting_after = scheduler.stats.waiting
        gate.set()
        await hold
        async with scheduler.slot(Priority.NEW, max_wait=0.1):  # free again: no wait at all
            pass
        return waiting_after, scheduler.stats

    waiting_after, stats = asyncio.run(go())
    assert waiting_after == 0
    assert (stats.running, stats.waiting) == (0, 0)


def test_released_slot_goes_to_the_next_waiter_and_comes_back_as_continuation():
    async def go():
        scheduler = SynthesisScheduler(1)
        order: list[str] = []
        client_reads = asyncio.Event()

        async def stalled():
            async with scheduler.slot() as slot:
                order.append("stalled starts")
                async with scheduler.released(slot):
                    await client_reads.wait()
                order.append("stalled resumes")
                await asyncio.sleep(0.01)

        async def job(name: str, priority: Priority):
            async with scheduler.slot(priority, max_wait=1.0):
                order.append(name)
                if name == "other":
                    client_reads.set()  # the stalled client reads while "other" runs
                    await asyncio.sleep(0.01)

        first = asyncio.create_task(stalled())
        await asyncio.sleep(0)
        other = asyncio.create_task(job("other", Priority.NEW))
        await asyncio.sleep(0.005)
        late = asyncio.create_task(job("late", Priority.NEW))
        await asyncio.gather(first, other, late)
        return order, scheduler.stats

    order, stats = asyncio.run(go())
    # The resumed reply (a continuation) goes before a new request that waited longer.
    assert order == ["stalled starts", "other", "stalled resumes", "late"]
    assert (stats.running, stats.waiting) == (0, 0)


def test_released_slot_that_never_resumes_frees_its_place():
    async def go():
        scheduler = SynthesisScheduler(1)
        with pytest.raises(RuntimeError):
            async with scheduler.slot() as slot:
                async with scheduler.released(slot):
                    raise RuntimeError("client dropped")
        return scheduler.stats

    stats = asyncio.run(go())
    assert (stats.running, stats.waiting) == (0, 0)


def test_connection_cap_leaves_room_under_the_file_limit():
    assert connection_cap(64, 1024) == 64
    assert connection_cap(64, RESERVED_FILES + 10) == 10
    assert connection_cap(64, RESERVED_FILES // 2) == 1  # always at least one
    assert connection_cap(64, resource.RLIM_INFINITY) == 64
    with pytest.raises(ValueError):
        connection_cap(0, 1024)


def test_one_address_holds_at_most_half_the_connections():
    assert address_share(64) == 32
    assert address_share(1) == 1
    assert client_address(("192.168.1.20", 51000)) == "192.168.1.20"
    assert client_address(("::ffff:192.168.1.20", 51000, 0, 0)) == "192.168.1.20"
    # One IPv6 device has many addresses (privacy extensions): its /64 counts as one.
    assert client_address(("2001:db8:1:2:aaaa::1", 1, 0, 0)) == client_address(("2001:db8:1:2:bbbb::9", 1, 0, 0))
    assert client_address(("2001:db8:1:2::1", 1, 0, 0)) != client_address(("2001:db8:1:3::1", 1, 0, 0))
    assert client_address(("fe80::1%eth0", 1, 0, 2)) == "fe80::/64"
    assert client_address("") is None  # a Unix socket's client
    assert client_address(None) is None


def test_accept_errors_give_one_warning_per_burst(caplog):
    loop = asyncio.new_event_loop()
    others: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: others.append(context))
    handler = AcceptErrorLog(loop, burst_gap_s=0.2)
    failure = {"message": "socket.accept() out of system resource",
               "exception": OSError(errno.EMFILE, "Too many open files")}  # fmt: skip
    try:
        with caplog.at_level(logging.WARNING):
            for _ in range(500):
                handler(loop, failure)
            first_burst = len(caplog.records)
            time.sleep(0.3)
            handler(loop, failure)
        handler(loop, {"message": "something else"})
    finally:
        loop.close()
    assert first_burst == 1
    assert len(caplog.records) == 2
    assert "Too many open files" in caplog.records[0].getMessage()
    assert "499 more" in caplog.records[1].getMessage()
    assert not any(record.exc_info for record in caplog.records)  # no traceback
    assert others == [{"message": "something else"}]  # the rest goes to the previous handler


def test_describe_names_the_model_never_its_path():
    custom = build_info("/home/someone/secret/models/model.yaml", []).tts[0].description
    catalog = build_info("demo", []).tts[0].description
    assert "model.yaml" in custom and "/home" not in custom and "secret" not in custom
    assert catalog.endswith("model demo")
