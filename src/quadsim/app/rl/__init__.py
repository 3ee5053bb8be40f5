"""Reinforcement learning on quadsim: ``quadsim train`` (PPO from Stable-Baselines3 on the
batched environments), ``quadsim eval`` and policies as plain array files (docs/rl.md).

Training needs the ``rl`` extra (``pip install 'quadsim[rl]'``); a policy file runs with NumPy
alone (:mod:`.policy`)."""  # noqa: D205, D209
