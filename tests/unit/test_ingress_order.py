"""A connection's produces hand their batches on in the order they were read (front_door/network/ingress_order.py)."""

from __future__ import annotations

import asyncio

from front_door.network.ingress_order import IngressOrder


def test_a_produce_waits_only_for_the_one_read_before_it_that_has_not_handed_its_batches_on() -> None:
    async def run() -> list[str]:
        order = IngressOrder()
        sent: list[str] = []
        first, second, third = order.take(), order.take(), order.take()
        await first.wait()  # nothing before it
        waiting = asyncio.create_task(second.wait())
        await asyncio.sleep(0)
        assert not waiting.done()  # the first is still adding its partitions
        first.done()
        await waiting
        sent.append("second")
        second.done()
        await third.wait()
        sent.append("third")
        third.done()
        fourth = order.take()
        await asyncio.wait_for(fourth.wait(), 1)  # everything before it went: no wait
        return sent

    assert asyncio.run(run()) == ["second", "third"]


def test_a_cancelled_wait_does_not_let_the_next_produce_overtake_the_one_before() -> None:
    async def run() -> bool:
        order = IngressOrder()
        first, second, third = order.take(), order.take(), order.take()
        waiting = asyncio.create_task(second.wait())
        await asyncio.sleep(0)
        waiting.cancel()  # the second's connection closed while it waited
        second.done()  # its handler's finally
        behind = asyncio.create_task(third.wait())
        await asyncio.sleep(0)
        overtook = behind.done()  # the first has not handed its batches on: the third must still wait
        first.done()
        await behind
        return overtook

    assert asyncio.run(run()) is False
