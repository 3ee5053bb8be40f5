"""Layer 4, the product: what users run.

Scenario files (``scenario``, ``preflight``, ``run``), the ``quadsim`` command (``cli``), logs
and summaries (``io``), an estimate's errors against the truth (``analysis``: RMSE, NEES, ATE,
RTE), figures (``plotting``), Gymnasium environments (``envs``) and quadsim's speed
measurements (``bench*``, the ``quadsim bench`` command; the comparisons with the peer
simulators are scripts in the repository's ``benchmarks/``). May import from every layer below.
"""
