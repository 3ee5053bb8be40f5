"""Quickstart: load a Crazyflie preset, print its flight envelope, and fly it open loop.

The drone starts in hover with its rotors at the hover speed, then rotor 1 (front-right) is
commanded 2 % faster for 0.2 s: the body pitches nose-up and rolls left, and drifts. The
first-principles model (rotor dynamics on) is integrated with SciPy's RK45.

Run:  python examples/quickstart.py
"""

import numpy as np
from scipy.integrate import solve_ivp

import quadsim
from quadsim.physics import rotation
from quadsim.physics.models import first_principles

drone = quadsim.load_params("cf2x_L250")
env = quadsim.envelope(drone)
print(f"{drone.name}: mass {drone.mass * 1e3:.1f} g, hover {env.hover_rpm:.0f} RPM, "
      f"thrust-to-weight {env.thrust_to_weight:.2f}, max tilt {np.degrees(env.tilt_max):.1f} deg")

f = quadsim.parametrize(first_principles.dynamics, drone)
hover = np.full(4, env.hover_rpm)


def rhs(t, x):
    """The model as an ODE right-hand side for SciPy: a 2 % step on rotor 1 for 0.2 s."""
    cmd = hover * np.where(np.arange(4) == 0, 1.02 if t < 0.2 else 1.0, 1.0)
    pos, quat, vel, w, rotor = np.split(x, [3, 7, 10, 13])
    return np.concatenate(f(pos, quat / np.linalg.norm(quat), vel, w, cmd, rotor))


x0 = np.concatenate([[0, 0, 1.0], [0, 0, 0, 1.0], np.zeros(3), np.zeros(3), hover])
sol = solve_ivp(rhs, (0.0, 0.5), x0, rtol=1e-9, atol=1e-9, max_step=1e-3)
pos, quat = sol.y[:3, -1], sol.y[3:7, -1]
roll, pitch, yaw = np.degrees(rotation.to_euler(quat / np.linalg.norm(quat)))
print(f"after {sol.t[-1]:.1f} s: position {np.round(pos, 3)} m, "
      f"roll {roll:.1f} deg, pitch {pitch:.1f} deg, yaw {yaw:.2f} deg")
