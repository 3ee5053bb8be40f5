"""``quadsim ros2 SCENARIO``: the node of :mod:`quadsim.app.ros2.node` as a command, its log
written as ``quadsim fly``'s (durable parts, ``trajectory.parquet``, ``summary.json``)."""  # noqa: D205, D209

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ...engines.sim import fault_report
from .. import io, preflight
from ..io import outdir
from ..io.parts import PARTS, PartWriter
from ..run import (
    OUTPUTS,
    check_part_messages,
    chunk_writer,
    echo_warnings,
    failure_lines,
    finish_run,
    kept_on_failure,
    loop_meta,
)
from ..scenario import build, load_scenario
from . import dds
from .node import Background, Ros2Node

__all__ = ["main"]


def main(args: Any) -> int:
    """``quadsim ros2 SCENARIO ...`` (parsed by :mod:`quadsim.app.cli`); the exit code."""
    def echo(s: str) -> None:
        print(s, file=sys.stderr)

    dds.topic(args.namespace)  # the options first: a mistake costs no build and no folder
    if args.network is not None:
        dds.check_interface(args.network)
    with echo_warnings(echo):
        sc = load_scenario(args.scenario)
        check_part_messages(sc)  # its parts' messages, before anything is built or flown
        objs = build(sc)
    out = Path(args.out) if args.out else Path("runs") / f"{Path(args.scenario).stem}_ros2"

    preflight.check_out_dir(out)
    with outdir.claim(out):
        preflight.check_no_killed_run(out)
        node = Ros2Node(objs, namespace=args.namespace, domain_id=args.domain_id,
                        network=args.network, rate=args.rate, timeout=args.timeout,
                        on_timeout=args.on_timeout)  # fmt: skip
        sim = objs.sim
        # the loop's metadata as quadsim fly writes it: its sensor parts' log columns too
        loop = loop_meta(float(sim.dt), node.loop.periods, node.loop.sens, "ros2", None)
        meta = objs.meta | loop | {"output": objs.meta["output"] | {"plots": False, "csv": False}}
        o = objs.output
        parts = PartWriter(out / PARTS, meta, flush_bytes=max(1, round(o["part_mb"] * 2**20)),
                           flush_seconds=o["part_seconds"],
                           before_first_part=lambda: outdir.set_aside(out, OUTPUTS))  # fmt: skip
        where = f"network interface {args.network}" if args.network else "loopback only"
        leaves = ",".join(["odom", *(pt.leaf for pt in node.part_pubs), "rotor_speeds",
                           "reference"])  # fmt: skip
        node.log(
            f"{node.n} drone{'s' if node.n > 1 else ''} on DDS domain {args.domain_id} "
            f"({where}), {1 / sim.dt:g} Hz {args.rate}, per drone {dds.topic(node.ns, 'd0')}/"
            f"{{{leaves}}}, commands {{cmd_rotor_speeds,cmd_pose,"
            f"cmd_attitude,cmd_mode}}; the loop on {node.loop.backend}; Ctrl-C stops"
        )
        if not args.network:
            node.log(
                f"to see it from ROS 2 on this machine: export "
                f"CYCLONEDDS_URI='{dds.config_xml()}' RMW_IMPLEMENTATION=rmw_cyclonedds_cpp "
                f"ROS_DOMAIN_ID={args.domain_id}"
            )
        with kept_on_failure(out):
            try:
                with Background(chunk_writer(out, parts)) as background:
                    rep = node.run(args.duration, on_chunk=background,
                                   log_every=int(objs.output["log_every"]))  # fmt: skip
            finally:
                parts.flush()
            meta["faults"] = fault_report(sim.status, float(sim.dt))  # a batch's diverged drones
            summary = finish_run(out, meta, rep["wall_s"], rep["signal"] is not None, rep["signal"])
            summary["ros2"] = {k: v for k, v in rep.items() if k != "signal"}
            io.write_summary(out / "summary.json", summary)
    lat = rep["lateness_ms"]
    pace = (
        f"; lateness median {lat['median']:.3f} ms, p99 {lat['p99']:.3f} ms, max "
        f"{lat['max']:.3f} ms"
        if lat
        else ""
    )
    node.log(
        f"stopped at t = {node.loop.time:.3f} s after {rep['ticks']} ticks "
        f"({rep['achieved_hz']:.1f} Hz{pace}); commands {rep['commands']['received']}, "
        f"dropped {rep['commands']['dropped']}, timeouts {rep['commands']['timeouts']}; "
        f"log in {out}"
    )
    for line in failure_lines({**summary, "crash_count": 0}):  # the diverged drones: exit 1
        print(line, file=sys.stderr)
    return 1 if summary.get("fault_count") else 0
