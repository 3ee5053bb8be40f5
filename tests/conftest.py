"""Shared fixtures: the ``xp`` backend fixture runs a test on every array backend and dtype.

Backends: numpy (float64), array_api_strict (float64), jax (float64 and float32, x64 enabled),
torch (float32 and float64). A backend that is not installed is skipped locally; with
``QUADSIM_REQUIRE_ALL_BACKENDS=1``, or in CI (``CI=true``), a missing backend fails instead, so
CI can never pass by skipping.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# The tests' own cache of compiled libraries and traces (issue 40, item 16: the suite wrote
# tens of MB into the user's ~/.cache/quadsim). Kept per machine, so a later run (CI on the same
# machine) reuses what an earlier one built; a test that needs another cache sets its own.
os.environ.setdefault("QUADSIM_CACHE_DIR",
                      str(Path.home() / ".cache" / "quadsim-tests" / "native"))  # fmt: skip

REQUIRE_ALL = (
    os.environ.get("QUADSIM_REQUIRE_ALL_BACKENDS") == "1" or os.environ.get("CI", "") == "true"
)


def require(module: str) -> Any:
    """Import an optional backend, skipping (locally) or failing (CI) when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if REQUIRE_ALL:
            pytest.fail(f"backend {module!r} is required in CI but not installed")
        pytest.skip(f"{module} not installed")


@dataclass(frozen=True)
class Backend:
    """One array backend at one floating-point precision."""

    name: str
    xp: Any
    dtype: Any
    bits: int

    def asarray(self, a: Any) -> Any:
        """NumPy data (or nested lists) to a backend array of this dtype."""
        return self.xp.asarray(np.asarray(a, dtype=np.float64), dtype=self.dtype)

    def numpy(self, a: Any) -> np.ndarray:
        """Backend array to a float64 NumPy array."""
        if hasattr(a, "detach"):
            a = a.detach().cpu()
        try:
            return np.asarray(np.from_dlpack(a), dtype=np.float64)
        except (TypeError, RuntimeError, AttributeError, BufferError):
            return np.asarray(a, dtype=np.float64)

    @property
    def rtol(self) -> float:
        """A relative tolerance for a few chained float operations at this precision."""
        return 1e-10 if self.bits == 64 else 2e-5


BACKENDS = ["numpy", "array_api_strict", "jax64", "jax32", "torch32", "torch64"]


def make_backend(name: str) -> Backend:
    if name == "numpy":
        return Backend(name, np, np.float64, 64)
    if name == "array_api_strict":
        xs = require("array_api_strict")
        return Backend(name, xs, xs.float64, 64)
    if name.startswith("jax"):
        jax = require("jax")
        jax.config.update("jax_enable_x64", True)
        jnp = jax.numpy
        return Backend(name, jnp, jnp.float64 if name == "jax64" else jnp.float32, int(name[3:]))
    if name.startswith("torch"):
        torch = require("torch")
        return Backend(name, torch, getattr(torch, f"float{name[5:]}"), int(name[5:]))
    raise ValueError(name)


@pytest.fixture(params=BACKENDS)
def xp(request: pytest.FixtureRequest) -> Backend:
    """Every backend and dtype, as a :class:`Backend`."""
    return make_backend(request.param)


_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGXFSZ", "SIGPIPE",
                                                "SIGCHLD", "SIGALRM", "SIGUSR1", "SIGUSR2")
                 if hasattr(signal, n))  # fmt: skip


STOP = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))

_OURS = ("QUADSIM_", "OMP_", "CC", "CI", "JAX_", "XLA_", "CUDA_", "CYCLONEDDS_", "ROS_")
"""A variable with one of these prefixes that appears during a test is the test's doing (quadsim
and the tests read them); others that appear come from a library's first import (Ray's
``RAY_CLIENT_MODE``, PyTorch's ``TORCHINDUCTOR_CACHE_DIR``, pygame's prompt) and are left alone.
A variable that was there before and changed or vanished is always the test's doing."""


_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _os_handler(sig: int) -> int | None:
    """The handler address the kernel has for ``sig`` (``sigaction``'s first field), or ``None``
    where it cannot be read. A C library that installs its own handler (behind Python's back) shows
    here while ``signal.getsignal`` still reports Python's."""
    buf = ctypes.create_string_buffer(512)  # larger than any platform's struct sigaction
    if _LIBC.sigaction(int(sig), None, buf) != 0:
        return None
    return ctypes.c_void_p.from_buffer(buf).value or 0


def _process_state() -> dict:
    """What a test may change for every later test of its worker: signal dispositions and the
    blocked set, the working directory, the environment, NumPy's error handling, the thread
    switch interval, JAX's x64 flag, PyTorch's thread count and default dtype."""
    state = {f"signal {signal.Signals(s).name}": signal.getsignal(s) for s in _SIGNALS}
    for s in STOP:  # the kernel's disposition too: what a raised signal really reaches
        state[f"kernel handler {signal.Signals(s).name}"] = _os_handler(s)
    state["blocked signals"] = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    state["working directory"] = os.getcwd()
    state["environment"] = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    state["numpy errors"] = np.geterr()
    state["switch interval"] = sys.getswitchinterval()
    if "jax" in sys.modules:
        state["jax_enable_x64"] = bool(sys.modules["jax"].config.read("jax_enable_x64"))
    if "torch" in sys.modules:
        state["torch threads"] = sys.modules["torch"].get_num_threads()
        state["torch default dtype"] = sys.modules["torch"].get_default_dtype()
    return state


def _restore(name: str, value: Any) -> None:
    if name.startswith("signal "):
        signal.signal(getattr(signal, name.split()[1]), value)
    elif name.startswith("kernel handler "):  # Python's own handler back in the kernel
        s = getattr(signal, name.split()[2])
        signal.signal(s, signal.getsignal(s))
    elif name == "blocked signals":
        signal.pthread_sigmask(signal.SIG_SETMASK, value)
    elif name == "working directory":
        os.chdir(value)
    elif name == "environment":
        for k in set(os.environ) - set(value):
            if k.startswith(_OURS):
                del os.environ[k]
        os.environ.update(value)
    elif name == "numpy errors":
        np.seterr(**value)
    elif name == "torch default dtype":
        sys.modules["torch"].set_default_dtype(value)
    elif name == "switch interval":
        sys.setswitchinterval(value)
    elif name == "jax_enable_x64":
        sys.modules["jax"].config.update("jax_enable_x64", value)
    elif name == "torch threads":
        sys.modules["torch"].set_num_threads(value)


_LIBRARY_SET = {"jax_enable_x64", "torch threads"}
"""Set by quadsim itself where asked (a float64 JAX simulator, ``quadsim train --threads``):
put back after each test, not counted against it."""


@pytest.fixture(autouse=True)
def _leaves_the_process_as_found() -> Any:
    """Every test leaves the process-wide state as it found it (issue 27: tests must pass in any
    order and under load). What a test changed is put back, and anything but what quadsim itself
    sets where asked (:data:`_LIBRARY_SET`) also fails the test that changed it."""
    before = _process_state()
    yield
    after = _process_state()
    leaked = []
    env, was = after["environment"], before["environment"]
    after["environment"] = {k: v for k, v in env.items() if k in was or k.startswith(_OURS)}
    for name, value in before.items():
        if after.get(name) != value:
            _restore(name, value)
            if name == "environment":
                diff = sorted(k for k in value.keys() | after[name].keys()
                              if value.get(k) != after[name].get(k))  # fmt: skip
                leaked.append(f"environment variables {diff}")
            elif name not in _LIBRARY_SET:
                leaked.append(f"{name}: {value!r} before, {after.get(name)!r} after")
    for name in after.keys() - before.keys():  # imported during the test: back to the default
        if name == "jax_enable_x64" and after[name]:
            _restore(name, False)
    if leaked:
        pytest.fail("the test changed process-wide state: " + "; ".join(leaked))
    why = _sigint_dead()
    if why:
        pytest.fail(f"after this test a SIGINT no longer raises KeyboardInterrupt ({why})")


def sigint_state() -> str:
    """SIGINT's state now, for a signal test's failure message: Python's and the kernel's
    handler, the blocked set, the thread."""
    import threading

    return (f"handler {signal.getsignal(signal.SIGINT)!r}, kernel {_os_handler(signal.SIGINT)}, "
            f"blocked {sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))}, main thread "
            f"{threading.current_thread() is threading.main_thread()}")  # fmt: skip


@pytest.fixture
def stop_signals_default() -> Any:
    """The stop signals' default dispositions for the test (SIGINT raises KeyboardInterrupt,
    SIGTERM and SIGHUP end the process), put back after.

    For the tests that raise a stop signal in this process. A test run started with ``nohup``
    ignores SIGHUP, one started as a background job of a shell without job control (``pytest
    ... &`` in a script) ignores SIGINT (POSIX; Python then installs no handler of its own), and
    the xdist workers inherit that: a raised SIGINT does nothing (issue 27, item 16: five such
    tests failed in full runs started that way). quadsim leaves an ignored signal ignored
    (:func:`quadsim.engines.signals.catchable`), so these tests set the defaults themselves; the
    tests that signal a child start it with ``signal_helpers.child_command``.
    """
    defaults = {s: signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL
                for s in STOP}  # fmt: skip
    old = {s: signal.signal(s, h) for s, h in defaults.items()}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _sigint_dead() -> str | None:
    """Why a SIGINT raised now would not stop a flight (``None``: it raises KeyboardInterrupt, as
    the signal tests need). Probed only where Python's default handler is installed."""
    import threading

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        return None
    return (f"kernel handler {_os_handler(signal.SIGINT)}, blocked "
            f"{sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))}, main thread "
            f"{threading.current_thread() is threading.main_thread()}, threads "
            f"{[th.name for th in threading.enumerate()]}")  # fmt: skip


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed-seed NumPy generator for random test states (no global RNG)."""
    return np.random.default_rng(12345)


class Touch:
    """Unpickled, it creates its file: the stand-in for the code a crafted pickle runs (issue
    40). Pickled as ``(pathlib.Path.touch, (path,))``: no test code is needed to unpickle it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.path,))


@pytest.fixture
def crafted(tmp_path: Path) -> Any:
    """``(payload, marker)``: an object that, pickled and then unpickled, creates ``marker`` (a
    file in the test's folder, absent at first): a test puts it where a file format might be
    unpickled and then checks that ``marker`` does not exist."""
    marker = tmp_path / "crafted_pickle_ran"
    return Touch(marker), marker
