"""quadsim: physics-based quadrotor simulation on NumPy, JAX and PyTorch, with CasADi twins.

The public face:

* :func:`load_params`, :func:`list_presets`, :class:`Params`: drone parameters from TOML presets;
* :func:`envelope`, :func:`terminal_velocity`: the derived flight envelope;
* :func:`parametrize`: bind a drone to a model function;
* :mod:`quadsim.physics.models`: the models and their registry; :mod:`quadsim.physics.rotation`:
  rotations.

Importing quadsim loads NumPy only; SciPy (min-snap trajectories, RK45), JAX, PyTorch,
CasADi, pyarrow and matplotlib are imported when used (``tests/app/test_startup.py`` checks the
``quadsim`` command's share of that).
"""

from .physics.bind import parametrize
from .physics.envelope import Envelope, envelope, terminal_velocity
from .physics.params import Params, list_presets, load_params

__version__ = "0.1.0"


__all__ = [
    "Envelope",
    "Params",
    "__version__",
    "envelope",
    "list_presets",
    "load_params",
    "parametrize",
    "terminal_velocity",
]
