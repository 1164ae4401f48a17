"""What the user does to a running eval, shared by the key handlers (or the SIGINT
handler) and the run thread: pause, quit, run another case next; and a timer whose
clock stops while the run is paused."""

from __future__ import annotations

import threading

from ds4.domain.eval.runner import Interruption
from ds4.ports.system import Timer


class PausableTimer:
    """Timer whose elapsed() leaves out the paused stretches."""

    def __init__(self, base: Timer) -> None:
        self._base = base
        self._paused_total = 0.0
        self._paused_at: float | None = None
        self._lock = threading.Lock()

    def unix(self) -> int:
        return self._base.unix()

    def elapsed(self) -> float:
        with self._lock:
            now = self._base.elapsed()
            held = now - self._paused_at if self._paused_at is not None else 0.0
            return now - self._paused_total - held

    def pause(self) -> None:
        with self._lock:
            if self._paused_at is None:
                self._paused_at = self._base.elapsed()

    def resume(self) -> None:
        with self._lock:
            if self._paused_at is not None:
                self._paused_total += self._base.elapsed() - self._paused_at
                self._paused_at = None


class RunControls:
    """The runner's RunControl: interruption() blocks while paused."""

    def __init__(self, timer: PausableTimer) -> None:
        self.timer = timer
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._running.set()
        self._quit = False
        self.signalled = False  # the quit came from Ctrl+C or a signal
        self._switch = False
        self._choice: int | None = None

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    @property
    def quitting(self) -> bool:
        return self._quit

    def toggle_pause(self) -> None:
        if self._running.is_set():
            self.timer.pause()
            self._running.clear()
        else:
            self.timer.resume()
            self._running.set()

    def quit(self, *, signalled: bool = False) -> None:
        with self._lock:
            self._quit = True
            self.signalled = self.signalled or signalled
        self.timer.resume()
        self._running.set()

    def run_next(self, number: int, *, running: int | None) -> None:
        """Run case `number` next; a different case running now is put back."""
        with self._lock:
            self._choice = number
            self._switch = running is not None and running != number

    def interruption(self) -> Interruption | None:
        while not self._running.wait(0.1):
            pass
        with self._lock:
            if self._quit:
                return Interruption.QUIT
            if self._switch:
                self._switch = False
                return Interruption.SWITCH
        return None

    def take_choice(self) -> int | None:
        with self._lock:
            choice, self._choice = self._choice, None
            return choice
