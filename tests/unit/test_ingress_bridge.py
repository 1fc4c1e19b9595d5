"""The front door's answers from the gateway (`front_door/ingress_bridge.py`): one request's batches answered
together."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from front_door.ingress_bridge import Answers


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
        waiting = answers.wait(30)
        with pytest.raises(StopIteration):
            waiting.send(None)  # done at its first step: it never suspends
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
