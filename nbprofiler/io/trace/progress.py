"""The progress bar of a trace load."""
from __future__ import annotations

import threading

# Inputs smaller than this load in well under the progress bar's 1 s delay.
PROGRESS_MIN_BYTES = 50_000_000

class Progress:
    """A tqdm.auto bar over input bytes that appears only when a load takes longer than a second (a
    shorter load never imports tqdm). duckdb parses a file in one call, so a ticker thread keeps the
    elapsed time moving meanwhile."""

    DELAY_S = 1.0

    def __init__(self, total: int, desc: str, enabled: bool = True):
        self.total, self.desc, self.enabled = total, desc, enabled
        self.bar = None
        self.done = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        # below this size the load ends before the bar would appear: no ticker either
        if self.enabled and self.total >= PROGRESS_MIN_BYTES:
            self._thread = threading.Thread(target=self._tick, daemon=True, name="nbprofiler-progress")
            self._thread.start()
        return self

    def _tick(self):
        if self._stop.wait(self.DELAY_S):
            return
        from tqdm.auto import tqdm
        with self._lock:
            self.bar = tqdm(total=self.total, initial=int(self.done), desc=self.desc, unit="B", unit_scale=True,
                            leave=False)
        while not self._stop.wait(0.5):
            self.bar.refresh()

    def advance(self, n: float) -> None:
        with self._lock:
            self.done += n
            if self.bar is not None:
                self.bar.update(int(n))

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.bar is not None:
            self.bar.close()
        return False
