r"""The PWM command level: a :class:`~quadsim.engines.sim.Simulator` on PWM through a battery.

:class:`PwmDrive` holds a battery per drone (:mod:`quadsim.physics.power`). One step with the
PWM ``(n, n_rotors)`` (0..65535, the Crazyflie firmware's motor commands):

1. the battery's terminal voltage ``V`` at its charge and the power drawn at the present rotor
   speeds (:func:`~quadsim.physics.power.battery_state`);
2. the rotor-speed command ``ω_ss(pwm, V)`` (:func:`~quadsim.physics.power.rpm_from_pwm`), which
   the simulator's rotor dynamics follow (its motor time constant);
3. the simulator's step;
4. the charge integrated at the mean power of the step (:func:`~quadsim.physics.power.discharge`).

Attributes after a step: ``voltage`` [V], ``current`` [A], ``power`` [W], ``charge`` (0..1),
``energy`` [J] used since the start, each ``(n,)``; ``empty`` where the voltage fell below the
cut-off (the drone then keeps flying on what the model gives; the flag is for the user).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..physics import power as pw

__all__ = ["PwmDrive"]


class PwmDrive:
    """A simulator stepped with motor PWM (module docstring).

    Args:
        sim: A :class:`~quadsim.engines.sim.Simulator` of a rotor-level model with rotor dynamics
            (its command is rotor speeds [RPM]).
        power: :class:`~quadsim.physics.power.PowerParams` or a preset name (default
            ``"cf21_stock"``).
        charge: The batteries' charge at the start, 0..1 (a number or ``(n,)``).

    Raises:
        ValueError: A simulator whose command is not rotor speeds, a charge outside 0..1.
    """

    def __init__(self, sim: Any, power: Any = "cf21_stock", charge: Any = 1.0) -> None:
        fields = dict(sim.system.fields)
        if sim.system.n_cmd != sim.drone.mixing_matrix.shape[1] or "rotor_vel" not in fields:
            raise ValueError("PwmDrive needs a rotor-level model with rotor dynamics "
                             "(its command: rotor speeds)")  # fmt: skip
        self.sim = sim
        self.params = pw.load_power(power) if isinstance(power, str) else \
            pw.check_power_params(power)  # fmt: skip
        q = np.broadcast_to(np.asarray(charge, np.float64), (sim.n,)).copy()
        if not np.all((q >= 0) & (q <= 1)):
            raise ValueError(f"charge must be in 0..1; got {charge!r}")
        self.charge = q
        self.energy = np.zeros(sim.n)
        self.power = pw.electrical_power(self._rpm(), self.params)
        self.voltage, self.current = pw.battery_state(self.charge, self.power, self.params)

    def _rpm(self) -> np.ndarray:
        return np.asarray(self.sim.state.rotor_vel, np.float64)

    @property
    def empty(self) -> np.ndarray:
        """Where the terminal voltage is below the cut-off ``(n,)``."""
        return self.voltage < self.params.v_cutoff

    def rpm_command(self, pwm: Any) -> np.ndarray:
        """The rotor-speed command ``(n, n_rotors)`` [RPM] of ``pwm`` at the present voltage."""
        pwm = np.asarray(pwm, np.float64)
        if np.any(~np.isfinite(pwm)) or np.any((pwm < 0) | (pwm > pw.PWM_FULL)):
            raise ValueError("pwm must be finite and in 0..65535")
        return pw.rpm_from_pwm(np.broadcast_to(pwm, (self.sim.n, pwm.shape[-1] if pwm.ndim else
                                                     self.sim.drone.mixing_matrix.shape[1])),
                               self.voltage[:, None], self.params)  # fmt: skip

    def step(self, pwm: Any, **kw: Any) -> Any:
        """One step with ``pwm`` ``(n, n_rotors)`` (broadcast; module docstring); ``kw`` go to
        :meth:`Simulator.step <quadsim.engines.sim.Simulator.step>` (wind, disturbances). Returns
        the simulator's new state."""  # noqa: D205, D209
        p0 = self.power
        state = self.sim.step(self.rpm_command(pwm), **kw)
        p1 = pw.electrical_power(self._rpm(), self.params)
        dt = self.sim.dt
        self.charge = pw.discharge(self.charge, 0.5 * (p0 + p1), dt, self.params)
        self.energy = self.energy + 0.5 * (p0 + p1) * dt
        self.power = p1
        self.voltage, self.current = pw.battery_state(self.charge, p1, self.params)
        return state

    def hover_pwm(self, hover_rpm: float) -> np.ndarray:
        """The PWM ``(n,)`` whose steady rotor speed is ``hover_rpm`` at the present voltage."""
        c0, c1, _ = (float(c) for c in self.params.rpm_coef)
        return np.clip((float(hover_rpm) - c0) / c1 / self.voltage * pw.PWM_FULL, 0, pw.PWM_FULL)
