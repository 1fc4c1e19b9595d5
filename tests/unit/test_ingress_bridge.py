"""The front door's answers from the gateway (`front_door/ingress_bridge.py`): one request's batches answered
together, a micro-batch's answers released a few per turn of the door's loop."""

from __future__ import annotations

import asyncio
from typing import Any

from front_door import ingress_bridge
from front_door.ingress_bridge import ANSWERS_PER_TURN, Answers


def _ok(offset: int) -> dict[str, Any]:
    return {"error_code": 0, "base_offset": offset}


def test_a_request_waits_for_every_batch_it_handed_on() -> None:
    async def scenario() -> None:
        answers = Answers()
        answers.expect()
        answers.expect()
        waiting = asyncio.create_task(answers.wait(30))
        answers.answer("a", _ok(1))
        await asyncio.sleep(0)
        assert not waiting.done()  # one of two answered
        answers.answer("b", _ok(2))
        await waiting
        assert answers.responses == {"a": _ok(1), "b": _ok(2)}

    asyncio.run(scenario())


def test_a_request_answered_before_it_waits_does_not_wait() -> None:
    async def scenario() -> None:
        answers = Answers()
        answers.expect()
        answers.answer("a", _ok(1))
        await asyncio.wait_for(answers.wait(30), 1)
        assert answers.responses == {"a": _ok(1)}

    asyncio.run(scenario())


def test_a_timeout_ends_the_wait_with_the_missing_answers_absent_and_a_late_one_harmless() -> None:
    async def scenario() -> None:
        answers = Answers()
        answers.expect()
        answers.expect()
        answers.answer("a", _ok(1))
        await answers.wait(0.01)
        assert answers.responses == {"a": _ok(1)}  # "b" timed out: the handler forgets it
        answers.answer("b", _ok(2))  # a response that was already on its way
        assert answers.responses["b"] == _ok(2)

    asyncio.run(scenario())


def test_a_micro_batchs_answers_are_released_a_few_per_turn_of_the_loop() -> None:
    """Between two turns the loop reads its connections: a client's next request waits for one turn's answers,
    not for all of them."""
    async def scenario() -> None:
        count = 2 * ANSWERS_PER_TURN + 5
        waiting = []
        for _ in range(count):
            answers = Answers()
            answers.expect()
            waiting.append(answers)
        woken: list[int] = []
        ingress_bridge._answer(lambda: woken.append(1), [(a, f"r{i}", _ok(i)) for i, a in enumerate(waiting)])
        answered = [sum(1 for a in waiting if a.responses)]
        for _ in range(2):
            await asyncio.sleep(0)
            answered.append(sum(1 for a in waiting if a.responses))
        assert answered == [ANSWERS_PER_TURN, 2 * ANSWERS_PER_TURN, count]
        assert woken == [1]  # Fetch's long polls are woken once for the lot
        assert [a.responses for a in waiting] == [{f"r{i}": _ok(i)} for i in range(count)]

    asyncio.run(scenario())
