"""System identification of quadsim's models from measured Crazyflie data.

* :mod:`quadsim.app.sysid.thrust_stand`: the RPM-to-thrust curve, the steady rotor speed from
  PWM and battery voltage, and their errors on the Crazyflie 2.1 thrust-stand runs in
  ``data/crazyflie-thrust-stand/`` (``docs/validation.md``, "Thrust stand").
"""
