"""The collector of a long-lived process settled once (streaming/python_heap.py), in a fresh interpreter each:
freezing is for the process's life."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from streaming.python_heap import FULL_PASS_INTERVAL_S, THRESHOLDS

REPO = Path(__file__).resolve().parents[2]


def _in_fresh_interpreter(code: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                          check=True)
    return json.loads(done.stdout)


def test_settling_freezes_what_is_alive_and_raises_the_thresholds_once() -> None:
    seen = _in_fresh_interpreter(
        "import gc, json\n"
        "from streaming.python_heap import settle_heap\n"
        "before = gc.get_freeze_count()\n"
        "first = settle_heap()\n"
        "frozen = gc.get_freeze_count()\n"
        "later = [object() for _ in range(3)]\n"
        "again = settle_heap()\n"
        "print(json.dumps({'before': before, 'first': first, 'frozen': frozen, 'again': again,\n"
        "                  'frozen_after': gc.get_freeze_count(), 'thresholds': gc.get_threshold()}))\n")
    assert seen["before"] == 0
    assert seen["first"] is True and seen["again"] is False
    assert isinstance(seen["frozen"], int) and seen["frozen"] > 1000  # the imports' objects at least
    assert seen["frozen_after"] == seen["frozen"]  # the second call froze nothing more
    assert seen["thresholds"] == list(THRESHOLDS)


def test_settling_again_freezes_only_after_modules_were_imported() -> None:
    seen = _in_fresh_interpreter(
        "import gc, json\n"
        "from streaming.python_heap import settle_heap\n"
        "settle_heap()\n"
        "first = gc.get_freeze_count()\n"
        "later = [[i] for i in range(500)]\n"
        "settle_heap()\n"
        "without_imports = gc.get_freeze_count()\n"
        "import xml.dom.minidom\n"
        "again = settle_heap()\n"
        "after_import = gc.get_freeze_count()\n"
        "made = [[i] for i in range(500)]\n"
        "settle_heap()\n"
        "print(json.dumps({'first': first, 'without_imports': without_imports, 'again': again,\n"
        "                  'after_import': after_import, 'last': gc.get_freeze_count(),\n"
        "                  'young': len(gc.get_objects())}))\n")
    assert seen["without_imports"] == seen["first"]  # task data alone is never frozen
    assert seen["again"] is False
    assert isinstance(seen["after_import"], int) and isinstance(seen["first"], int)
    assert seen["after_import"] > seen["first"] + 500  # the new modules' objects and what was alive with them
    assert seen["last"] == seen["after_import"]
    young = seen["young"]
    assert isinstance(young, int) and 500 <= young < 5_000  # what came after: the last lists, not the imports


def test_a_frozen_object_is_still_freed_when_its_last_reference_goes() -> None:
    seen = _in_fresh_interpreter(
        "import gc, json, weakref\n"
        "from streaming.python_heap import settle_heap\n"
        "class Kept: pass\n"
        "kept = Kept(); ref = weakref.ref(kept)\n"
        "settle_heap()\n"
        "del kept\n"
        "print(json.dumps({'freed': ref() is None}))\n")
    assert seen["freed"] is True


def test_a_python_worker_settles_on_its_first_preparation() -> None:
    seen = _in_fresh_interpreter(
        "import gc, json\n"
        "from streaming.python_worker import prepare_worker\n"
        "prepare_worker()\n"
        "print(json.dumps({'frozen': gc.get_freeze_count(), 'thresholds': gc.get_threshold()}))\n")
    assert isinstance(seen["frozen"], int) and seen["frozen"] > 0
    assert seen["thresholds"] == list(THRESHOLDS)


def test_a_sink_worker_freezes_what_it_keeps_between_tasks_and_unfreezes_once_an_interval() -> None:
    seen = _in_fresh_interpreter(
        "import gc, json\n"
        "from streaming.python_heap import keep_between_tasks, settle_heap\n"
        "settle_heap()\n"
        "settled = gc.get_freeze_count()\n"
        "kept = [[i] for i in range(1_000)]\n"
        "first = keep_between_tasks(now=0.0)\n"
        "frozen = gc.get_freeze_count()\n"
        "young = len(gc.get_objects())\n"
        f"full = keep_between_tasks(now={FULL_PASS_INTERVAL_S} + 1.0)\n"
        "after = gc.get_freeze_count()\n"
        f"again = keep_between_tasks(now={FULL_PASS_INTERVAL_S} + 2.0)\n"
        "print(json.dumps({'settled': settled, 'first': first, 'frozen': frozen, 'young': young, 'full': full,\n"
        "                  'after': after, 'again': again, 'refrozen': gc.get_freeze_count()}))\n")
    settled, frozen, refrozen = seen["settled"], seen["frozen"], seen["refrozen"]
    assert isinstance(settled, int) and isinstance(frozen, int) and isinstance(refrozen, int)
    assert seen["first"] is False and frozen >= settled + 1_000  # the kept lists among what was frozen
    assert isinstance(seen["young"], int) and seen["young"] < 100  # nothing left for a collection to visit
    assert seen["full"] is True and seen["after"] == 0  # the interval's full pass: everything visible again
    assert seen["again"] is False and refrozen >= frozen
