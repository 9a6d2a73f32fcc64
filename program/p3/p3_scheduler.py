"""Credit-based priority scheduling of communication tasks: P3's sender-side priority queue, reached from above the kvstore.

Pure Python (standard library only), so the framework's tests run it without MXNet.

The idea is ByteScheduler's (Peng et al., SOSP'19): stock MXNet hands every push
to ps-lite at once and from there it is FIFO, so an engine priority never reaches
the wire. Instead each slice's push+pull is a ``Task`` that waits in a priority
queue once its gradient is ready; a task is released to the kvstore only while
the bytes in flight stay within a credit, and its completion (learned
asynchronously) frees credit and releases more. A high-priority task that
becomes ready late (the input layer's gradient, which backward produces last)
overtakes every lower-priority task still queued.

With a parameter server in synchronous mode, a push completes only once every
worker has pushed that key, so credits of different workers are coupled: a
worker whose credit is full of slices the others have not released yet (they
preferred higher-priority slices that were ready earlier for them) waits for
them while they wait for it. Hence one rule beside priority and credit: the
oldest unfinished task in the *canonical* order (``Task.order``, the same on
every worker: the order backward produces the slices) is always released, even
beyond the credit. The globally oldest unfinished task is then released by
every worker once ready and completes, so the job always progresses; this costs
at most one task beyond the credit. And since the credit stands for bytes on the
wire, a task in flight much longer than tasks usually take (three times the
recent median time, at least ``min_stale`` seconds) is taken off the
credit: its data has long reached the server, where it waits for the other
workers. Without that, such tasks would hold the credit and leave the link idle
(``tick`` lets a thread apply it between events).

``CommLoop`` is the dedicated thread that owns a scheduler: notices from any
thread (engine callbacks) are queued to it, and it alone starts communication.
"""
from __future__ import annotations

import collections
import heapq
import itertools
import logging
import queue
import threading
import time

log = logging.getLogger(__name__)


class Task:
    """One unit of communication: a slice's push and pull.

    ``priority``: higher runs first (MXNet's convention: 0 for the input layer,
    -i for parameter i). Ties are released in the order they were posted.
    ``order``: the task's place in an order every worker shares (see the module
    docstring); None: the order of posting. The scheduler fills ``posted``,
    ``released`` and ``done`` (clock seconds).
    """

    __slots__ = ("name", "priority", "nbytes", "payload", "order", "seq", "posted", "released", "done", "state",
                 "stale")

    def __init__(self, name, priority, nbytes, payload=None, order=None):
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"task {name!r}: nbytes must be a whole number >= 0, got {nbytes!r}")
        self.name = name
        self.priority = int(priority)
        self.nbytes = nbytes
        self.payload = payload
        self.order = order
        self.seq = -1
        self.posted = self.released = self.done = None
        self.state = "new"  # new -> queued -> in_flight -> done
        self.stale = False  # in flight, but taken off the credit (waits for other workers)

    def __repr__(self):
        return f"Task({self.name!r}, priority={self.priority}, nbytes={self.nbytes}, {self.state})"


class CreditScheduler:
    """Ready tasks in a priority queue; released while the bytes in flight stay within ``credit``.

    ``credit`` 0 means no limit (every ready task is released at once, in
    priority order). With ``batch``, while tasks are in flight nothing is
    released until at least ``batch`` bytes of credit are free. A task larger than the credit is released when nothing
    else is in flight, so it can never stall the queue. Priority is strict: a
    lower-priority task never jumps a higher-priority one that does not fit.
    The one exception keeps workers coupled through a synchronous parameter
    server from deadlocking: the oldest unfinished task (by ``Task.order``) is
    always released; and tasks in flight for unusually long stop counting
    against the credit (both: see the module docstring).

    ``post`` and ``complete`` return the tasks they released, in release order;
    the caller starts their communication. Thread-safe.
    """

    def __init__(self, credit=0, clock=time.time, batch=0, min_stale=0.010):
        if isinstance(credit, bool) or not isinstance(credit, int) or credit < 0:
            raise ValueError(f"P3_CREDIT must be a whole number of bytes >= 0, got {credit!r}")
        self.credit = credit
        # While tasks are in flight, wait until this many bytes of credit are free (released tasks then go
        # out together: fewer calls and callbacks per byte). 0: release as soon as a task fits.
        self.batch = min(batch, credit)
        self.clock = clock
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._heap = []  # (-priority, seq, task) of queued tasks (entries of released tasks are skipped)
        self._unfinished = []  # (order, seq, task) of queued and in-flight tasks (entries of done ones are skipped)
        self._seq = itertools.count()
        self._queued = 0
        self._in_flight = 0
        self._in_flight_bytes = 0
        self.max_in_flight_bytes = 0  # the most bytes ever in flight at once (for tests and logs)
        self.beyond_credit = 0  # tasks released beyond the credit to keep workers from deadlocking
        self.released_order = []  # names, in release order (kept only when record_order is set)
        self.record_order = False
        self.keep_progress = True  # False only to show, in tests, the deadlock it prevents
        self.min_stale = min_stale  # None: tasks never stop counting against the credit
        self._flying = collections.deque()  # released tasks, in release order (done and stale ones are skipped)
        self._latencies = collections.deque(maxlen=64)  # release-to-done seconds of recent tasks
        self._counted = 0  # tasks in flight that count against the credit (not stale)
        self.stale_tasks = 0  # tasks taken off the credit so far

    @property
    def in_flight(self):
        return self._in_flight

    @property
    def in_flight_bytes(self):
        return self._in_flight_bytes

    @property
    def queued(self):
        return self._queued

    def idle(self):
        with self._lock:
            return not self._queued and not self._in_flight

    def post(self, *tasks):
        """Tasks whose data is ready: queue them, return those released now."""
        with self._lock:
            now = self.clock()
            for task in tasks:
                if task.state != "new":
                    raise ValueError(f"{task!r} was posted before")
                task.seq = next(self._seq)
                task.posted = now
                task.state = "queued"
                self._queued += 1
                heapq.heappush(self._heap, (-task.priority, task.seq, task))
                heapq.heappush(self._unfinished, (task.seq if task.order is None else task.order, task.seq, task))
            return self._release_locked(now)

    def complete(self, task):
        """A released task's communication finished: free its credit, return the tasks released now."""
        with self._lock:
            if task.state != "in_flight":
                raise ValueError(f"{task!r} completed but it is not in flight")
            now = self.clock()
            task.done = now
            task.state = "done"
            self._in_flight -= 1
            if task.stale:
                task.stale = False
            else:
                self._counted -= 1
                self._in_flight_bytes -= task.nbytes
                self._latencies.append(now - task.released)
            released = self._release_locked(now)
            if not self._queued and not self._in_flight:
                self._idle.notify_all()
            return released

    def tick(self):
        """Apply the clock between events (tasks in flight too long stop counting); return the tasks released."""
        with self._lock:
            if not self._queued:
                return []
            return self._release_locked(self.clock())

    def stale_after(self):
        """Seconds after which a task in flight stops counting against the credit (None: not yet known)."""
        if self.min_stale is None or len(self._latencies) < 8:
            return None
        median = sorted(self._latencies)[len(self._latencies) // 2]
        return max(self.min_stale, 3 * median)

    def _take_stale_off(self, now):
        limit = self.stale_after()
        flying = self._flying
        while flying and (flying[0].state != "in_flight" or flying[0].stale):
            flying.popleft()
        if limit is None:
            return
        while flying and now - flying[0].released > limit:
            task = flying.popleft()
            if task.state == "in_flight" and not task.stale:
                task.stale = True
                self._counted -= 1
                self._in_flight_bytes -= task.nbytes
                self.stale_tasks += 1

    def wait_idle(self, timeout=None):
        """Block until nothing is queued or in flight; False on timeout."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._queued and not self._in_flight, timeout)

    def state(self):
        """A one-line summary for logs."""
        with self._lock:
            flying = sorted((e[2] for e in self._unfinished if e[2].state == "in_flight"), key=lambda t: t.seq)
            return (f"{self._queued} queued, {self._in_flight} in flight ({self._in_flight_bytes} bytes counted: "
                    f"{', '.join(t.name for t in flying[:8])}{' ...' if len(flying) > 8 else ''}), "
                    f"{self.beyond_credit} released beyond the credit, {self.stale_tasks} taken off it so far")

    def _fits(self, task):
        return (self.credit == 0 or self._counted == 0
                or self._in_flight_bytes + task.nbytes <= self.credit)

    def _release_one(self, task, now, released):
        task.released = now
        task.state = "in_flight"
        self._queued -= 1
        self._in_flight += 1
        self._counted += 1
        self._in_flight_bytes += task.nbytes
        self._flying.append(task)
        self.max_in_flight_bytes = max(self.max_in_flight_bytes, self._in_flight_bytes)
        if self.record_order:
            self.released_order.append(task.name)
        released.append(task)

    def _release_locked(self, now):
        released = []
        heap = self._heap
        if self.credit:
            self._take_stale_off(now)
        if self.batch and self._counted and self.credit - self._in_flight_bytes < self.batch:
            heap = ()  # too little credit free to be worth a release (the oldest task below still goes)
        while heap:
            task = heap[0][2]
            if task.state != "queued":  # released out of priority order before
                heapq.heappop(heap)
            elif self._fits(task):
                heapq.heappop(heap)
                self._release_one(task, now, released)
            else:
                break
        unfinished = self._unfinished
        while unfinished and unfinished[0][2].state == "done":
            heapq.heappop(unfinished)
        if self.keep_progress and unfinished and unfinished[0][2].state == "queued":  # the oldest always goes
            self.beyond_credit += 1
            self._release_one(unfinished[0][2], now, released)
        return released


class CommLoop:
    """A dedicated thread that runs every notice submitted to it, in order.

    Engine callbacks must return at once and must not call into MXNet's
    kvstore, so they only ``submit`` a function here; this thread runs it (it
    alone talks to the kvstore). An exception in a notice is kept in ``error``,
    logged, and handed to ``on_error`` (which should release anything the
    engine waits for, so nothing hangs); later notices still run.
    """

    _STOP = object()

    def __init__(self, name="p3-comm", on_error=None, on_idle=None, idle_s=60.0, on_tick=None, tick_s=0.002):
        self._queue = queue.SimpleQueue()
        # Called on this thread every tick_s seconds without a notice (scheduler.tick) while it returns true.
        self.on_tick = on_tick
        self.tick_s = tick_s
        self.on_error = on_error
        self.on_idle = on_idle  # called on this thread after idle_s seconds without a notice (diagnostics)
        self.idle_s = idle_s
        self.notices = 0  # notices run, and how long they waited in the queue (seconds): a busy thread shows here
        self.lag_total = 0.0
        self.lag_max = 0.0
        self.error = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, *args):
        self._queue.put((fn, args, time.perf_counter()))

    def call(self, fn, *args, timeout=60.0):
        """Run ``fn`` on the loop's thread and return its result (for setup and tests)."""
        done = threading.Event()
        box = {}

        def run():
            try:
                box["value"] = fn(*args)
            except BaseException as exc:  # handed back to the caller
                box["error"] = exc
            finally:
                done.set()

        self.submit(run)
        if not done.wait(timeout):
            raise TimeoutError(f"the communication thread did not run {fn!r} within {timeout} s")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def close(self, timeout=60.0):
        """Run what is queued, then stop the thread. True if it stopped within ``timeout``."""
        if self._thread.is_alive():
            self._queue.put((self._STOP, (), 0.0))
            self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self):
        return self._thread.is_alive()

    def _run(self):
        quiet_since = time.perf_counter()
        ticking = False  # on_tick returns whether it wants more ticks; a notice starts them again
        while True:
            try:
                fn, args, submitted = self._queue.get(timeout=self.tick_s if ticking else self.idle_s)
            except queue.Empty:
                if ticking:
                    try:
                        ticking = bool(self.on_tick())
                    except BaseException:
                        ticking = False
                        log.exception("P3 communication thread: on_tick failed")
                if time.perf_counter() - quiet_since > self.idle_s:
                    quiet_since = time.perf_counter()
                    if self.on_idle is not None:
                        try:
                            self.on_idle()
                        except BaseException:
                            log.exception("P3 communication thread: on_idle failed")
                continue
            quiet_since = time.perf_counter()
            ticking = self.on_tick is not None
            if fn is self._STOP:
                return
            lag = time.perf_counter() - submitted
            self.notices += 1
            self.lag_total += lag
            if lag > self.lag_max:
                self.lag_max = lag
            try:
                fn(*args)
            except BaseException as exc:  # keep serving: the engine may wait on later notices
                if self.error is None:
                    self.error = exc
                log.exception("P3 communication thread: %r failed", fn)
                if self.on_error is not None:
                    try:
                        self.on_error(exc)
                    except BaseException:
                        log.exception("P3 communication thread: on_error failed")
