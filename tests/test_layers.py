"""The four roles hold in the code: one module charges the ledger, methods reach silos only through
the declared aggregator protocol, parties load no model code, and the registry matches the audit."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import privsyn_fed as pf
from privsyn_fed import audit
from privsyn_fed.accounting import Accountant
from privsyn_fed.aggregation import Aggregator, InProcessAggregator
from privsyn_fed.methods import METHODS
from privsyn_fed.mpc.aggregator import MPCAggregator
from privsyn_fed.silo import MarginalsQuery

from .conftest import make_frame

PACKAGE = Path(pf.__file__).parent
ROOT = "privsyn_fed"
CHARGES = {"charge", "gaussian", "exponential"}


def _calls(path: Path):
    """``(attribute, line)`` of every method call in a module, except on a noise sampler
    (``noise.gaussian(...)`` draws noise; it charges nothing)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            if not (isinstance(receiver, ast.Name) and receiver.id == "noise"):
                yield node.func.attr, node.lineno


def test_the_ledger_is_charged_from_the_mechanism_layer_only():
    """``Accountant.charge`` (and its ``gaussian`` / ``exponential`` entry points) is called from
    ``mechanisms.py`` and from the accountant itself, nowhere else in the package."""
    charging = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") for attr, _ in _calls(p) if attr in CHARGES}
    assert charging == {"mechanisms.py", "accounting/ledger.py"}, charging


#: Modules in ``methods/`` that hold no coordinator and see no aggregator: the graphical model over mbi
#: (whose estimators take a model or its potentials as a warm start), plans, workloads and output rows.
MODEL_HELPERS = {"pgm.py", "allocation.py", "workload.py", "output.py"}


def test_methods_use_the_declared_protocol_only():
    """No probing of the aggregator, no exact sums and no silo access from method code."""
    for path in (PACKAGE / "methods").glob("*.py"):
        text = path.read_text()
        names = {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}
        if path.name not in MODEL_HELPERS:
            assert not {"hasattr", "getattr"} & names - ({"getattr"} if path.name == "__init__.py" else set()), path
        for forbidden in ("open_exact_sum_for_checks", "exact_sum_and_share", "._silos", ".local("):
            assert forbidden not in text, f"{path.name} uses {forbidden}"


@pytest.mark.parametrize("cls", [InProcessAggregator, MPCAggregator])
def test_both_aggregators_implement_the_whole_protocol(cls):
    members = {n for n in dir(Aggregator) if not n.startswith("_")} | set(Aggregator.__annotations__)
    for name in members:
        instance_attributes = ("threat_model", "schema", "where", "secure", "parties_noise")
        assert hasattr(cls, name) or name in instance_attributes, f"{cls.__name__}.{name}"
        if callable(getattr(Aggregator, name, None)) and not isinstance(getattr(Aggregator, name), property):
            ours = inspect.signature(getattr(cls, name)).parameters
            declared = inspect.signature(getattr(Aggregator, name)).parameters
            assert list(ours) == list(declared), f"{cls.__name__}.{name}: {list(ours)} != {list(declared)}"


def test_parties_load_no_model_code():
    """A party's serve loop and the wire protocol import neither JAX nor mbi (nor any method; the
    release lifecycle that the package's face loads brings only ``methods.output``, numpy rows)."""
    code = (
        "import sys, privsyn_fed.silo.queries, privsyn_fed.mpc.party, privsyn_fed.mpc.aggregator; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'mbi') "
        "or m.startswith('privsyn_fed.methods.') and m != 'privsyn_fed.methods.output'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_release_does_not_import_scipy_stats(tmp_path):
    """``scipy.stats`` takes most of a second to import and a release uses none of it (only the
    empirical audit does): a whole AIM release and its summary leave it unimported."""
    from tests.conftest import SCHEMA, make_frame

    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    make_frame(300, seed=1).to_csv(tmp_path / "silo.csv", index=False)
    argv = ["synth", "--method", "aim", "--schema", "schema.json", "--silo", "silo.csv", "--epsilon", "1",
            "--delta", "1e-9", "--out", "out.csv", "--quiet"]  # fmt: skip
    code = f"import sys; from privsyn_fed.cli import main; main({argv!r}); print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip().splitlines()[-1] == "False" and (tmp_path / "out.csv").exists()


def _module_imports(path: Path, modules: set[str], planted: str = "") -> set[str]:
    """The package modules ``path`` imports, anywhere in it (function-local imports included), with
    ``planted`` source added to its own."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    package = list(rel.parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text() + planted)):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + (node.module.split(".") if node.module else []))
            for alias in node.names:
                out.add(f"{mod}.{alias.name}" if f"{mod}.{alias.name}" in modules else mod)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def _import_graph(planted: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Each package module's imports of other package modules (a submodule's import of its own
    ancestor packages does not count: they are initialised first; but the package root is the face
    at the top, so an import of it from below does). ``planted``: source added to some modules."""
    modules = {}
    for p in PACKAGE.rglob("*.py"):
        rel = p.relative_to(PACKAGE.parent).with_suffix("")
        modules[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = p
    planted = planted or {}
    return {
        m: {
            d
            for d in _module_imports(p, set(modules), planted.get(m, ""))
            if d in modules and d != m and (d == ROOT or not m.startswith(d + "."))
        }
        for m, p in modules.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of imports in ``graph`` (its modules in order, the first repeated last), or None."""
    state: dict[str, int] = {}

    def visit(m: str, trail: list[str]) -> list[str] | None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                return trail[trail.index(d) :] + [d]
            if d not in state and (found := visit(d, trail + [d])):
                return found
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m, [m])):
            return found
    return None


#: The package's layers, top to bottom: a module imports only its own layer's part or parts below it.
#: The demo runs the command line; a release states its terms to the MPC parties (``mpc``); the
#: audit re-derives schedules with ``methods``' workload and
#: allocation; a saved model is checked by the audit; methods fit the samplers of ``model``;
#: evaluation scores a release with ``methods``' workload and model; noise samplers sit
#: below the aggregators that draw the parties' noise; schema drafting and encoding read tables
#: (``common``).
LAYERS = (
    "demo",
    "cli",
    "synthesizer",
    "agent",
    "site",
    "api",
    "release",
    "mpc",
    "draft_dp",
    "saved_model",
    "audit",
    "evaluation",
    "methods",
    "model",
    "mechanisms",
    "aggregation",
    "noise",
    "silo",
    "schema",
    "accounting",
    "common",
)
FACES = {"privsyn_fed", "privsyn_fed.__main__"}  # the package's own face sits above every layer


def _layer(module: str) -> str:
    return module.split(".")[1]


def _layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """``"a -> b"`` for each import of a module ``b`` in a layer above ``a``'s (or in no layer)."""
    out = []
    for m, deps in graph.items():
        if m in FACES:
            continue
        for d in deps:
            if d in FACES or LAYERS.index(_layer(d)) < LAYERS.index(_layer(m)):
                out.append(f"{m} -> {d}")
    return sorted(out)


def test_the_import_graph_has_no_cycle():
    """No module imports, directly or not, a module that imports it."""
    found = _cycle(_import_graph())
    assert found is None, "import cycle: " + " -> ".join(found or [])


def test_every_part_of_the_package_has_a_layer_and_the_root_is_small():
    graph = _import_graph()
    assert {_layer(m) for m in graph if m not in FACES} == set(LAYERS)
    root = {p.name for p in PACKAGE.glob("*.py")} - {"__init__.py", "__main__.py"}
    assert len(root) <= 6, sorted(root)


def test_each_layer_imports_only_layers_below_it():
    violations = _layer_violations(_import_graph())
    assert not violations, violations


def test_a_planted_upward_import_or_cycle_is_caught():
    """The two checks above are not vacuous: an import of ``api`` from the silo breaks the layering,
    and with ``api``'s own import of the silo it closes a cycle."""
    graph = _import_graph()
    assert "privsyn_fed.silo.silo" in graph["privsyn_fed.api"] or "privsyn_fed.silo" in graph["privsyn_fed.api"]
    planted = {m: set(d) for m, d in graph.items()}
    planted["privsyn_fed.silo"].add("privsyn_fed.api")
    assert _layer_violations(planted) == ["privsyn_fed.silo -> privsyn_fed.api"]
    assert _cycle(planted) is not None


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("privsyn_fed.common.settings", "from privsyn_fed import Schema"),
        ("privsyn_fed.common.settings", "from .. import Schema"),
        ("privsyn_fed.common.settings", "import privsyn_fed"),
        ("privsyn_fed.common", "from .. import Schema"),
        ("privsyn_fed.noise", "from . import Schema"),
    ],
)
def test_a_planted_import_of_the_package_root_from_below_is_caught(module, source):
    """The root ``__init__`` is the face at the top: a module below it that imports it (by name or
    relatively) breaks the layering and closes a cycle, although the root is one of its parents."""
    graph = _import_graph()
    assert not any(ROOT in deps for m, deps in graph.items() if m not in FACES)
    planted = _import_graph({module: f"\n{source}\n"})
    assert set(_layer_violations(planted)) - set(_layer_violations(graph)) == {f"{module} -> {ROOT}"}
    assert _cycle(planted) is not None


#: Imports that reach past a folder's face on purpose, by the module they reach: the face would load
#: what the importer must not.
PAST_FACES = {
    # a release's rows without the method registry that ``methods``' face loads (parties load no method code)
    "privsyn_fed.methods.output",
    # the graphical model over mbi and JAX, loaded only where a model is fitted or read back
    "privsyn_fed.methods.pgm",
}


def _folder(module: str) -> str | None:
    """The role folder of a package module (None: the root or a module of the root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else None


@functools.cache
def _published(folder: str) -> frozenset[str]:
    """What a folder's face names in its ``__all__`` (a submodule named there is part of the face)."""
    return frozenset(getattr(importlib.import_module(f"{ROOT}.{folder}"), "__all__", ()))


def _past_faces(planted: dict[str, str] | None = None) -> list[str]:
    """``"path:line -> module"`` for each import, in any module, of another role
    folder's module that is not its face (``__init__``): a dotted ``from ..schema.schema import
    Schema``, or a submodule that the face does not name (``from ..mpc import world``).
    ``planted``: source added to some modules."""
    planted = planted or {}
    modules = {}
    for p in PACKAGE.rglob("*.py"):
        rel = p.relative_to(PACKAGE.parent).with_suffix("")
        modules[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = p
    out = set()
    for m, p in modules.items():
        path = p.relative_to(PACKAGE.parent).as_posix()
        package = list(p.relative_to(PACKAGE.parent).parts[:-1])
        for node in ast.walk(ast.parse(p.read_text() + planted.get(m, ""))):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                mod = ".".join(base + (node.module.split(".") if node.module else []))
                targets = {(f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod) for a in node.names}
            elif isinstance(node, ast.Import):
                mod, targets = "", {a.name for a in node.names}
            else:
                continue
            for t in targets:
                folder = _folder(t)
                if t not in modules or folder in (None, _folder(m)) or t == f"{ROOT}.{folder}" or t in PAST_FACES:
                    continue
                if mod == f"{ROOT}.{folder}" and t.rsplit(".", 1)[1] in _published(folder):
                    continue
                out.add(f"{path}:{node.lineno} -> {t}")
    return sorted(out)


def test_imports_across_folders_go_through_the_faces():
    """A module imports another role folder's names from its face (``from ..schema import Schema``),
    so that a folder's inside can move without its users; ``PAST_FACES`` lists the exceptions."""
    past = _past_faces()
    assert not past, past


@pytest.mark.parametrize(
    ("module", "source", "caught"),
    [
        ("privsyn_fed.model.label", "from ..schema.schema import Schema", "privsyn_fed.schema.schema"),
        ("privsyn_fed.model.label", "from ..mpc import world", "privsyn_fed.mpc.world"),
        ("privsyn_fed.noise", "import privsyn_fed.common.errors", "privsyn_fed.common.errors"),
        ("privsyn_fed.model.label", "from ..schema import Schema", None),
        ("privsyn_fed.model.label", "from ..mpc import certs", None),
        ("privsyn_fed.model.label", "from .checks import check_total", None),
    ],
)
def test_a_planted_import_past_a_face_is_caught(module, source, caught):
    """The check above is not vacuous: an import of another folder's module past its face is caught,
    one through the face (or within the folder) is not."""
    found = set(_past_faces({module: f"\n{source}\n"})) - set(_past_faces())
    assert [f.split(" -> ")[1] for f in found] == ([caught] if caught else []), found


def test_the_registry_agrees_with_the_audit():
    """The audit keeps its own methods and selection sensitivities on purpose; they must match."""
    assert set(audit.RELEASE_METHODS) == set(METHODS)
    assert set(audit.METHODS) == set(METHODS) | {"schema-draft"}  # and the schema drafts of `schema draft --dp`
    for name, spec in METHODS.items():
        opts = spec.options_class()
        variants = ("naive", "private", "oracle") if name == "flaim" else (None,)
        for variant in variants:
            if variant:
                opts.variant = variant
            key = (name, variant) if variant else name
            assert spec.selection_sensitivity(1.0, opts) == audit.EM_SENSITIVITY.get(key), key


def test_an_exact_sum_is_refused_during_a_private_release(schema):
    silos = [pf.Silo.from_frame(make_frame(50, seed=k), schema, name=f"s{k}") for k in range(2)]
    agg = InProcessAggregator(silos)
    query = MarginalsQuery(((0,),))
    exact = agg.open_exact_sum_for_checks(query, agg.silo_names, label="check")
    assert exact.sum() == 100
    acc = Accountant(1.0, 1e-9, "independent")
    agg.bind_release(acc)
    with pytest.raises(PermissionError, match="refused"):
        agg.open_exact_sum_for_checks(query, agg.silo_names, label="check")
    acc.mark_non_private("a test mode")
    assert np.array_equal(agg.open_exact_sum_for_checks(query, agg.silo_names, label="check"), exact)
    agg.bind_release(None)


def test_only_declared_queries_reach_a_silo(schema):
    agg = InProcessAggregator([pf.Silo.from_frame(make_frame(20, seed=1), schema, name="s")])
    with pytest.raises(TypeError, match="declared queries"):
        agg.open_exact_sum_for_checks(lambda silo: silo.marginal([0]), ["s"], label="lambda")


def test_every_module_is_at_most_500_lines():
    """A module holds one idea: none grows past 500 lines."""
    long = {
        str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 500
    }
    assert not long, long
