"""Comparing two flight logs, as the tests of the loop's runners need it."""

from __future__ import annotations

import numpy as np


def assert_logs_equal(a: dict, b: dict, tol: float = 1e-9) -> float:
    """Same keys in the same order, shapes and dtypes; floats to ``tol`` relative to each key's
    largest magnitude (``lost_wrench`` to the commanded wrench's: it is rounding noise away from
    saturation); flags equal. Returns the worst relative error."""
    assert list(a) == list(b)
    worst = 0.0
    for key in b:
        x, y = a[key], b[key]
        assert x.shape == y.shape and x.dtype == y.dtype, (key, x.shape, y.shape, x.dtype, y.dtype)
        if x.dtype == bool:
            np.testing.assert_array_equal(x, y, err_msg=key)
            continue
        ref = b["cmd_wrench"] if key == "lost_wrench" else y
        scale = max(float(np.abs(ref).max()), np.finfo(float).tiny)
        err = float(np.abs(x - y).max()) / scale
        worst = max(worst, err)
        assert err <= tol, (key, err)
    return worst
