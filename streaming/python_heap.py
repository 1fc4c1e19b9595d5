"""The cyclic garbage collector of the gateway's long-lived Python processes, settled once they have started
(`settle_heap`): the driver with its front door, a door of its own, and the Python workers.

CPython's collector runs a full collection whenever the objects that survived into the oldest generation since
the last one reach a quarter of those already there, and each full collection visits every tracked object the
process holds: after the imports of PySpark, pandas, pyarrow and kio, and with a door's in-flight requests,
200 000–300 000 objects, ~150–270 ms with the interpreter's lock held. Under a load of many small requests
those requests live a few seconds, long enough to be promoted, so full collections came every second or two:
in a driver serving ~1 000 one-record produces a second through its door, 37 full collections in a minute took
11.8–13.0 s of the ~0.5 core its Python used. PySpark's daemon also runs `gc.collect()` after every task of a
reused worker (~100–150 ms each with the imports of the stage and the sink). Settled, both visit only what came
after the start.

- `gc.freeze()` moves every object alive at the start (modules, classes, the session, the configuration:
  alive for the process's life) to the permanent generation, which no collection visits. They are still freed
  by reference counting; only a reference cycle among them is never collected, as it would not be before the
  process's end anyway.
- **Imported later**: a Python worker goes on importing during its first tasks (pyarrow's IPC and compute
  modules, pandas' internals on first use, the Kafka client, the package's own modules a task is the first to
  need). Their functions, classes, tables and the importer's entries live as long as the worker too, and left
  unfrozen they were 50 000–100 000 objects for PySpark's collection after every task to visit (~10–40 ms a task
  in each of the stage's and the sink's workers). So a worker settles again at each task's start
  (`prepare_worker`) whenever it has imported a module since its last freeze: a collection first, then the
  freeze, a few times in its life. The task data alive at such a moment (the sink's kept logs) is frozen with
  them; it is freed by reference counting as before, and a cycle among it waits for the process's end: at most
  one set of kept logs, once per settling.
- **What the sink's worker keeps between tasks** (`keep_between_tasks`): the partition logs it keeps open (~33
  tracked objects each, ~33 000 for 1 000 partitions) were visited by that collection after every task, 15–48 ms
  of the worker's CPU at each micro-batch. They hold no reference cycles (each is freed by reference counting
  once dropped), so the sink's worker freezes what is alive at each task's start, after the previous task's
  collection; the collection after the task visits what the task made. A cycle among objects frozen this way
  would wait for the process's end, so once every `FULL_PASS_INTERVAL_S` the worker unfreezes instead and that
  task's collection visits everything (~0.1 s).
- Higher thresholds (`THRESHOLDS`: the youngest generation collected every 10 000 allocations, not 700, and
  the older two less often): the short-lived objects of a request or a micro-batch are freed by reference
  counting before a collection looks at them, and cycles among them are still collected young.
docs/performance.md ("Scale", the load spread over every partition) has the measurements.
"""

from __future__ import annotations

import gc
import sys
import time

# gc.set_threshold: the youngest generation's allocations, then collections of the younger one per older one's
THRESHOLDS = (10_000, 50, 100)

# A sink worker's full collection at most this often (`keep_between_tasks`)
FULL_PASS_INTERVAL_S = 600.0

_modules_frozen: int | None = None  # how many modules the process had imported at its last freeze
_last_full_pass: float | None = None  # when `keep_between_tasks` last unfroze


def settle_heap() -> bool:
    """Collect what the start left, freeze what is alive, raise the thresholds: once per process (False when
    this process had settled already). A later call freezes again only when modules were imported since (see
    the module's docstring, "imported later")."""
    global _modules_frozen
    if _modules_frozen is not None:
        if len(sys.modules) != _modules_frozen:
            gc.collect()
            gc.freeze()
            _modules_frozen = len(sys.modules)
        return False
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    _modules_frozen = len(sys.modules)
    return True


def keep_between_tasks(now: float | None = None) -> bool:
    """At a sink task's start, after `settle_heap`: what the worker holds now frozen, or, once every
    `FULL_PASS_INTERVAL_S`, everything unfrozen so that the collection after this task visits it all (see the
    module's docstring, "What the sink's worker keeps"). Returns whether it unfroze."""
    global _last_full_pass
    now = time.monotonic() if now is None else now
    if _last_full_pass is None:
        _last_full_pass = now
    if now - _last_full_pass >= FULL_PASS_INTERVAL_S:
        _last_full_pass = now
        gc.unfreeze()
        return True
    gc.freeze()
    return False
