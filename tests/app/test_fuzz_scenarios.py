"""Property test of ``quadsim fly``: any scenario file, valid or not, gets an exit code, no crash.

Each example starts from a tiny valid scenario (one drone, 0.02 s of flight) and changes ONE key of
:data:`quadsim.app.scenario.SCHEMA` (or adds an unknown key, or replaces a section), to a valid
value or to one the schema rules out (wrong type, NaN/inf, zero or negative where it must be
positive, a string outside the choices, malformed walls/boxes/waypoints). ``quadsim.app.cli.main``
runs in process and must

* return 0, 1 or 2 (success, simulation failure, bad input), never raise;
* print no Python traceback;
* on exit 2, name the key path it was given (the only key that differs from a valid file);
* exit 2 for a value the schema itself rules out.

Flights stay tiny so the test takes seconds: ``duration`` and ``n`` keep their small base values
unless they are the key under test. ``n`` is drawn from 1..8 or from sizes no machine can hold
(>= 1e9 drones), which ``quadsim fly`` must refuse before building anything (preflight memory
estimate). ``duration`` and ``sim.dt`` are drawn so a valid run has at most a few thousand steps:
the CLI announces long runs but does not refuse them, so a huge valid duration would really fly.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("pyarrow")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from quadsim.app.cli import main  # noqa: E402
from quadsim.app.scenario import SCHEMA, Key  # noqa: E402

# CI: the same examples on every run (reproducible); QUADSIM_FUZZ_PROFILE=fuzz-dev explores.
settings.register_profile(
    "fuzz-ci",
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "fuzz-dev",
    max_examples=1000,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

#: The valid file every example starts from: one drone, ten 2 ms steps of hovering.
BASE: dict[str, dict[str, Any]] = {"": {"duration": 0.02, "n": 1}}

#: Largest valid ``duration`` [s] drawn (with ``sim.dt`` >= MIN_DT: at most ~1000 steps).
MAX_DURATION = 0.1
MIN_DT = 1e-4
#: ``n`` beyond this many drones cannot fit in any machine's memory (40 kB each: 40 TB).
REFUSED_N = 10**9

FLOAT_EDGE = [0.0, -0.0, -1.0, 1e-300, -1e300, 1e300, 1.7976931348623157e308, 5e-324]
NONFINITE = [math.nan, math.inf, -math.inf]

NAN, INF = math.nan, math.inf
ONE = [1.0, 1.0, 1.0]
BAD_VEC3 = [[], [1.0, 2.0], [1.0, 2.0, 3.0, 4.0], ["a", 0.0, 0.0], [[1.0], 0.0, 0.0], 1.0,
            "1,2,3", [True, 0.0, 0.0]]  # fmt: skip
BAD_TIMES = [[1.0], [1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, -1.0, 1.0],
             [1.0, NAN, 1.0], [INF, 1.0, 1.0], ["1", 1.0, 1.0], 1.0, [[1.0]] * 3]  # fmt: skip
BAD_WAYPOINTS = [[], [[0.0, 0.0, 1.0]], [0.0, 0.0, 1.0], [[0.0, 0.0], [1.0, 1.0]],
                 [[0.0, 0.0, 1.0], "x"], [[0.0, 0.0, 1.0], [NAN, 0.0, 1.0]],
                 [[0.0, 0.0, 1.0], [INF, 0.0, 1.0]], [[0.0, 0.0, 1.0], {"x": 1.0}],
                 [["a", 0.0, 1.0], [1.0, 0.0, 1.0]], "waypoints", 3]  # fmt: skip
BAD_WALLS = [[{"axis": "w", "at": 3.0}], [{"axis": "x", "at": "3"}], [{"axis": "x"}],
             [{"axis": "x", "at": 3.0, "side": 0}], [{"axis": "x", "at": 3.0, "side": 1.0}],
             [{"axis": "x", "at": 3.0, "height": 1.0}], [{"axis": "x", "at": NAN}],
             [{"axis": "x", "at": INF}], [[0.0, 3.0]], ["x"], [3.0], {"axis": "x"}, "x",
             [{"axis": 0, "at": 3.0}]]  # fmt: skip
BAD_BOXES = [[{"lo": [0.0, 0.0, 0.0], "hi": [0.0, 1.0, 1.0]}],
             [{"lo": ONE, "hi": [0.0, 0.0, 0.0]}], [{"lo": [0.0, 0.0, 0.0]}],
             [{"lo": [0.0, 0.0], "hi": [1.0, 1.0]}],
             [{"lo": [0.0, 0.0, 0.0], "hi": ONE, "r": 1.0}],
             [{"lo": [0.0, 0.0, NAN], "hi": ONE}], [{"lo": [-INF, 0.0, 0.0], "hi": ONE}],
             [{"lo": "0", "hi": ONE}], [[0.0, 0.0, 0.0, 1.0, 1.0, 1.0]],
             {"lo": [0.0, 0.0, 0.0], "hi": ONE}, [1.0]]  # fmt: skip

# strings TOML can hold without escapes it rejects: no control characters, no surrogates
text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12)


# --- TOML writer (tomllib reads only) -----------------------------------------------------------


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def toml_key(k: str) -> str:
    bare = k and all(c.isascii() and (c.isalnum() or c in "-_") for c in k)
    return k if bare else json.dumps(k, ensure_ascii=False)


def toml_document(doc: dict[str, Any]) -> str:
    top = doc.get("", {})
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in top.items()]
    for section, body in doc.items():
        if section == "":
            continue
        if isinstance(body, dict):
            lines.append(f"\n[{toml_key(section)}]")
            lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in body.items()]
        else:  # a section replaced by a value: top-level key, before any [table]
            lines.insert(0, f"{toml_key(section)} = {toml_value(body)}")
    return "\n".join(lines) + "\n"


# --- values: (value, ruled out by the schema itself?) ------------------------------------------


def floats_valid(spec: Key, key: str) -> st.SearchStrategy[float]:
    lo = 0.0 if spec.positive or key.endswith(("_rel", "_std", "_std_deg")) else -1e3
    if key == "duration":
        return st.floats(0.002, MAX_DURATION)
    if key == "dt":
        return st.floats(MIN_DT, 0.01)
    if key == "mocap_latency":  # a multiple of the base dt (0.002 s)
        return st.integers(0, 20).map(lambda k: k * 0.002)
    edges = [x for x in FLOAT_EDGE if x > 0 or (x >= lo and not spec.positive)]
    return st.floats(lo, 1e3, exclude_min=spec.positive) | st.sampled_from(edges)


def values(section: str, key: str, spec: Key) -> st.SearchStrategy[tuple[Any, bool]]:
    """(value, schema_invalid) for one key."""
    wrong_scalar = st.sampled_from(["1.0", "x", True, [], {}, [1.0]])  # never a float
    nonfinite = st.sampled_from(NONFINITE)
    out: list[st.SearchStrategy[tuple[Any, bool]]] = []
    t = spec.type
    if t == "float":
        out.append(floats_valid(spec, key).map(lambda v: (v, False)))
        out.append(nonfinite.map(lambda v: (v, True)))
        out.append(wrong_scalar.map(lambda v: (v, True)))
        if spec.positive:
            out.append(st.sampled_from([0.0, -0.0, -1.0, -1e300, 0]).map(lambda v: (v, True)))
    elif t == "int":
        if key == "n":
            ok = st.integers(1, 8) | st.integers(REFUSED_N, 2**63 - 1)
        else:
            ok = st.integers(1 if spec.positive else -(2**63), 2**63 - 1)
        out.append(ok.map(lambda v: (v, False)))
        out.append(st.sampled_from([1.5, 1.0, "1", True, [1]]).map(lambda v: (v, True)))
        out.append(nonfinite.map(lambda v: (v, True)))
        if spec.positive:
            out.append(st.sampled_from([0, -1, -(2**63)]).map(lambda v: (v, True)))
    elif t == "bool":
        out.append(st.booleans().map(lambda v: (v, False)))
        out.append(st.sampled_from([0, 1, "true", 1.0, []]).map(lambda v: (v, True)))
    elif t == "str":
        if spec.choices:
            out.append(st.sampled_from(spec.choices).map(lambda v: (v, False)))
            out.append(
                (text | st.sampled_from([c.upper() for c in spec.choices] + [" hover", ""]))
                .filter(lambda v: v not in spec.choices)
                .map(lambda v: (v, True))
            )
        else:  # free text; a preset, gains or IMU name that does not exist is bad input too
            out.append(text.map(lambda v: (v, False)))
        out.append(st.sampled_from([1, 1.5, True, ["a"], {"a": 1}]).map(lambda v: (v, True)))
    elif t == "vec3":
        num = st.floats(-1e3, 1e3)
        out.append(st.lists(num, min_size=3, max_size=3).map(lambda v: (v, False)))
        out.append(st.sampled_from(BAD_VEC3).map(lambda v: (v, True)))
        out.append(
            st.tuples(nonfinite, st.integers(0, 2)).map(
                lambda a: ([a[0] if i == a[1] else 0.5 for i in range(3)], True)
            )
        )
    elif t == "floats":  # segment_times (with waypoints of 3 segments in the base, see below)
        times = st.lists(st.floats(0.01, 10.0), min_size=3, max_size=3)
        out.append(times.map(lambda v: (v, False)))
        out.append(st.sampled_from(BAD_TIMES).map(lambda v: (v, True)))
    elif key == "waypoints":
        wp = st.lists(st.floats(-5.0, 5.0), min_size=3, max_size=3)
        out.append(st.lists(wp, min_size=2, max_size=5).map(lambda v: (v, False)))
        out.append(st.sampled_from(BAD_WAYPOINTS).map(lambda v: (v, True)))
    elif key == "walls":
        wall = st.fixed_dictionaries(
            {"axis": st.sampled_from("xyz"), "at": st.floats(-50.0, 50.0)},
            optional={"side": st.sampled_from([1, -1])},
        )
        out.append(st.lists(wall, max_size=3).map(lambda v: (v, False)))
        out.append(st.sampled_from(BAD_WALLS).map(lambda v: (v, True)))
    elif key == "boxes":
        box = st.tuples(
            st.lists(st.floats(-10.0, 10.0), min_size=3, max_size=3),
            st.lists(st.floats(0.01, 5.0), min_size=3, max_size=3),
        ).map(lambda a: {"lo": a[0], "hi": [lo + d for lo, d in zip(*a, strict=True)]})
        out.append(st.lists(box, max_size=3).map(lambda v: (v, False)))
        out.append(st.sampled_from(BAD_BOXES).map(lambda v: (v, True)))
    else:  # pragma: no cover - a new list key: give it a strategy above
        raise AssertionError(f"no strategy for {section}.{key} ({t})")
    return st.one_of(out)


KEYS = [(s, k, spec) for s, keys in SCHEMA.items() for k, spec in keys.items()]


def path_of(section: str, key: str) -> str:
    return f"{section}.{key}" if section else key


@st.composite
def cases(draw: Any) -> tuple[dict, str, bool]:
    """A scenario document, the key path that was changed, and whether the schema rules it out."""
    doc = {s: dict(v) for s, v in BASE.items()}
    kind = draw(st.sampled_from(["key"] * 8 + ["unknown", "section"]))
    if kind == "unknown":
        section = draw(st.sampled_from(list(SCHEMA)))
        name = draw(st.sampled_from(["colour", "Duration", "n_drones", "dt", "typo_key"]))
        assume(name not in SCHEMA[section] and not (section == "" and name in SCHEMA))
        doc.setdefault(section, {})[name] = draw(st.sampled_from([1, 1.0, "x", True, [1.0]]))
        return doc, path_of(section, name), True
    if kind == "section":
        section = draw(st.sampled_from([s for s in SCHEMA if s]))
        doc[section] = draw(st.sampled_from([1, "x", [1.0, 2.0], True]))
        return doc, section, True
    section, key, spec = draw(st.sampled_from(KEYS))
    value, invalid = draw(values(section, key, spec))
    if section == "trajectory" and key in ("waypoints", "segment_times"):
        doc["trajectory"] = {"kind": "min_snap"}  # context: the keys are read for min_snap
        if key == "segment_times":
            doc["trajectory"]["waypoints"] = [[0, 0, 1], [0.1, 0, 1], [0.1, 0.1, 1], [0, 0, 1]]
    if section == "" and key == "duration" and not invalid:
        value = max(value, 0.002)
    doc.setdefault(section, {})[key] = value
    return doc, path_of(section, key), invalid


def fly(doc: dict, tmp: Path) -> tuple[Any, str, str]:
    """Exit code (or what escaped ``main``), stdout, stderr with the file's path as ``<file>``."""
    d = Path(tempfile.mkdtemp(dir=tmp))
    scenario = d / "scenario.toml"
    scenario.write_text(toml_document(doc), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(["fly", str(scenario), "--out", str(d / "out"), "--no-plots", "--quiet"])
        except BaseException as e:  # what escapes main is the finding
            rc = e
    return rc, out.getvalue(), err.getvalue().replace(str(d), "<dir>")


def names(message: str, path: str) -> bool:
    """``path`` (``sim.dt``, ``n``) appears in ``message`` as a whole key path, not inside one."""
    return re.search(rf"(?<![\w.]){re.escape(path)}(?![\w])", message) is not None


@pytest.fixture(scope="module", autouse=True)
def _jax_compile_cache(tmp_path_factory):
    """Each flight jit-compiles its controller (~1.5 s); most examples compile the same program,
    so a persistent compilation cache for this module brings a flight down to ~0.2 s."""
    try:
        import jax
    except ImportError:
        yield
        return
    names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
             "jax_persistent_cache_min_entry_size_bytes")  # fmt: skip
    old = {k: getattr(jax.config, k) for k in names}
    jax.config.update(names[0], str(tmp_path_factory.mktemp("jax_cache")))
    jax.config.update(names[1], 0.0)
    jax.config.update(names[2], 0)
    yield
    for k, v in old.items():
        jax.config.update(k, v)


def test_toml_writer_round_trips():
    import tomllib

    doc = {
        "": {"duration": 0.02, "name": 'a "q" \\ é', "n": 3},
        "world": {"walls": [{"axis": "x", "at": -1.5}], "ground": False},
        "wind": {"mean": [math.inf, -math.inf, 0.5]},
        "trajectory": 4,
    }
    back = tomllib.loads(toml_document(doc))
    assert back["duration"] == 0.02 and back["name"] == 'a "q" \\ é' and back["trajectory"] == 4
    assert back["world"] == doc["world"] and back["wind"]["mean"] == [math.inf, -math.inf, 0.5]
    assert math.isnan(tomllib.loads(toml_document({"": {"x": math.nan}}))["x"])


def test_base_scenario_flies(tmp_path):
    rc, out, err = fly(BASE, tmp_path)
    assert rc == 0, (out, err)


@settings(settings.get_profile(os.environ.get("QUADSIM_FUZZ_PROFILE", "fuzz-ci")))
@given(case=cases())
def test_fly_any_scenario_exit_code_no_traceback(tmp_path, case):
    doc, changed, schema_invalid = case
    rc, out, err = fly(doc, tmp_path)
    text_ = toml_document(doc)
    assert not isinstance(rc, BaseException), f"main raised {rc!r} on\n{text_}\nstderr: {err}"
    assert rc in (0, 1, 2), f"exit {rc} on\n{text_}\nstderr: {err}"
    assert "Traceback" not in err and "Traceback" not in out, f"traceback on\n{text_}\n{err}"
    if rc == 2:  # only `changed` differs from a valid file: the message must point at it
        assert names(err, changed), f"exit 2 does not name {changed!r} on\n{text_}\nstderr: {err}"
    if schema_invalid:
        assert rc == 2, f"{changed}: the schema rules this out, got exit {rc} on\n{text_}"
