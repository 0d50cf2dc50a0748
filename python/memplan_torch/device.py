"""Where a step runs: its device, how to name it, time on it and keep its random streams.

Everything that differs between the CPU and a CUDA device is here, so that the measuring
code (costs, workspaces, peaks) and the executor stay device-blind:
- ``of(tensors)``: the one device a step's tensors live on (mixed devices are refused);
- ``label(device)``: "cpu" or "cuda:<device name>", for the labels of measured figures;
- ``Timer``: host clocks on the CPU; on CUDA, event pairs on the current stream, read after
  one synchronisation (host clocks would time the kernels' launches, not their work);
- random streams: ``rng_state``/``set_rng_state`` for the generator of one device, and
  ``preserved_rng`` to leave the CPU's and the given devices' generators as they were.
Only public ``torch``/``torch.cuda`` functions are used.
"""
from __future__ import annotations

import contextlib
import time
from typing import Iterable

import torch


def of(tensors: Iterable) -> torch.device:
    """The device of the tensors in `tensors` (others are ignored): CPU when there are none. Raises
    ValueError naming both devices when they are on more than one."""
    found = None
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            continue
        if found is None:
            found = t.device
        elif t.device != found:
            raise ValueError(f"the step's tensors are on more than one device ({found} and {t.device}); "
                             "memplan_torch plans a step on one device")
    return found if found is not None else torch.device("cpu")


def is_cuda(device) -> bool:
    return torch.device(device).type == "cuda"


def label(device) -> str:
    """'cpu', or 'cuda:<name>' ('cuda:NVIDIA H200'): what a measured figure was measured on."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return device.type


def synchronize(device) -> None:
    """Waits for the device's queued work (nothing to wait for on the CPU)."""
    if is_cuda(device):
        torch.cuda.synchronize(device)


class Timer:
    """Microseconds of code run between ``start()`` and ``stop()``, read with ``results()``.

    On the CPU, host clocks. On CUDA, a pair of events recorded on the current stream around the code:
    the time the device spent from reaching the first to reaching the second, which is the code's
    kernels (and the gaps where the device waited for the host to launch them); ``results()``
    synchronises once and reads every pair."""

    def __init__(self, device):
        self.cuda = is_cuda(device)
        self.device = torch.device(device)
        self._pairs: list = []
        self._t0 = 0.0

    def start(self) -> None:
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self._pairs.append([e, None])
        else:
            self._t0 = time.perf_counter()

    def stop(self) -> None:
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self._pairs[-1][1] = e
        else:
            self._pairs.append((time.perf_counter() - self._t0) * 1e6)

    def results(self) -> list[float]:
        """Microseconds of each start/stop pair, in order (and forgets them)."""
        if self.cuda:
            torch.cuda.synchronize(self.device)
            out = [a.elapsed_time(b) * 1e3 for a, b in self._pairs]  # elapsed_time: milliseconds
        else:
            out = list(self._pairs)
        self._pairs = []
        return out


def rng_state(device) -> torch.Tensor:
    """A copy of the state of `device`'s default generator (the one its random ops draw from)."""
    device = torch.device(device)
    if device.type == "cpu":
        return torch.get_rng_state()
    if device.type == "cuda":
        return torch.cuda.get_rng_state(device)
    raise ValueError(f"random ops on device '{device}' are not supported (cpu and cuda are)")


def set_rng_state(device, state: torch.Tensor) -> None:
    device = torch.device(device)
    if device.type == "cpu":
        torch.set_rng_state(state)
    elif device.type == "cuda":
        torch.cuda.set_rng_state(state, device)
    else:
        raise ValueError(f"random ops on device '{device}' are not supported (cpu and cuda are)")


@contextlib.contextmanager
def preserved_rng(devices: Iterable = ()):
    """Leaves the CPU's generator and those of `devices` (CUDA devices; others are ignored) as they were
    on entry, whatever the body draws or seeds."""
    keep = [torch.device("cpu")]
    for d in devices:
        d = torch.device(d)
        if d.type == "cuda" and d.index is None:
            d = torch.device("cuda", torch.cuda.current_device())
        if d.type == "cuda" and d not in keep:
            keep.append(d)
    saved = [(d, rng_state(d)) for d in keep]
    try:
        yield
    finally:
        for d, s in saved:
            set_rng_state(d, s)
