"""Layer 4, the product: what users run.

Scenario files (``scenario``, ``preflight``, ``run``), the ``quadsim`` command (``cli``), logs
and summaries (``io``), an estimate's errors against the truth (``analysis``: RMSE, NEES, ATE,
RTE), figures (``plotting``), Gymnasium environments (``envs``) and the benchmarks
(``bench*``). May import from every layer below.
"""
