"""Sweeps and Monte-Carlo campaigns: ``quadsim sweep SWEEP.toml`` (docs/sweeps.md).

A sweep file (:mod:`.spec`) names a base scenario and axes; its runs are batched into tasks
(:mod:`.tasks`), run by a local process pool or a Ray cluster (:mod:`.executors`), collected
into ``results.parquet`` with plots, resumably (:mod:`.run`)."""  # noqa: D209
