"""The layout rules of design.md that code can check."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_adapters_resolves_to_this_project() -> None:
    import adapters

    assert Path(adapters.__file__).resolve().parent == ROOT / "adapters"


def test_core_never_imports_adapters() -> None:
    offenders = []
    for path in (ROOT / "clawbot").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "adapters"]
    assert offenders == []


def test_agents_folder_is_data_not_a_package() -> None:
    assert not list((ROOT / "agents").glob("*.py"))


def import_graph(
    root: Path, packages: tuple[str, ...] = ("clawbot", "adapters")
) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports: every ``import`` and ``from ...
    import`` anywhere in the file (type-only and function-level ones too), relative ones
    resolved; ``from pkg import name`` counts ``pkg.name`` when that is a module. Importing
    ``a.b.c`` runs ``a/b/__init__.py`` first, so it counts ``a.b`` too, unless the importer
    lives inside ``a.b`` (its own packages are initialized before it)."""
    files = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        own_packages = {".".join(here[:n]) for n in range(1, len(here) + 1)}
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                target = ".".join([*base, *([node.module] if node.module else [])])
                targets.append(target)
                targets += [f"{target}.{alias.name}" for alias in node.names]
        parents = [".".join(t.split(".")[:n]) for t in targets for n in range(1, t.count(".") + 1)]
        graph[module] = {t for t in targets if t in files and t != module} | {
            p for p in parents if p in files and p not in own_packages
        }
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, a]``) per import that closes one, found depth-first."""
    cycles: list[list[str]] = []
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> None:
        path.append(module)
        for target in sorted(graph[module]):
            if target in path:
                cycles.append([*path[path.index(target) :], target])
            elif target not in done:
                visit(target)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module)
    return cycles


def test_import_graph_finds_relative_and_type_only_cycles(tmp_path: Path) -> None:
    package = tmp_path / "clawbot"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "__init__.py").write_text("from . import leaf\n")
    (package / "inner" / "leaf.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..top import X\n"
    )
    (package / "top.py").write_text("import clawbot.inner\nX = 1\n")
    graph = import_graph(tmp_path, ("clawbot",))
    assert graph["clawbot.inner"] == {"clawbot.inner.leaf"}
    assert graph["clawbot.inner.leaf"] == {"clawbot.top"}
    assert import_cycles(graph) == [
        ["clawbot.inner", "clawbot.inner.leaf", "clawbot.top", "clawbot.inner"]
    ]


def test_import_graph_finds_a_cycle_through_a_package_init(tmp_path: Path) -> None:
    """``pkg/__init__`` imports ``impl``, which imports ``user``, which imports
    ``pkg.records``: importing ``pkg.records`` runs ``pkg/__init__`` first, so Python
    fails on a partially initialized module although no file imports ``pkg`` itself."""
    package = tmp_path / "clawbot"
    (package / "pkg").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "pkg" / "__init__.py").write_text("from clawbot.impl import run\n")
    (package / "pkg" / "records.py").write_text("Record = int\n")
    (package / "impl.py").write_text("from clawbot.user import use\nrun = use\n")
    (package / "user.py").write_text("from clawbot.pkg.records import Record\nuse = Record\n")
    assert import_cycles(import_graph(tmp_path, ("clawbot",))) == [
        ["clawbot.impl", "clawbot.user", "clawbot.pkg", "clawbot.impl"]
    ]


def test_import_graph_covers_the_adapters(tmp_path: Path) -> None:
    for package in ("clawbot", "adapters"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "adapters" / "one.py").write_text("from adapters import two\n")
    (tmp_path / "adapters" / "two.py").write_text("from adapters.one import X\n")
    assert import_cycles(import_graph(tmp_path)) == [
        ["adapters.one", "adapters.two", "adapters.one"]
    ]


def test_no_import_cycles() -> None:
    cycles = import_cycles(import_graph(ROOT))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


MAX_CLASS_LINES = 400


def test_no_class_is_longer_than_400_lines() -> None:
    """design.md: a class over about 400 lines does more than one thing; split it."""
    long = []
    for folder in ("clawbot", "adapters"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_CLASS_LINES:
                        where = path.relative_to(ROOT)
                        long.append(f"{where}: {node.name} has {lines} lines")
    assert long == [], "classes over 400 lines: " + "; ".join(long)


STORE_PUBLIC = {
    "clawbot.store",
    "clawbot.store.interface",
    "clawbot.store.protocols.agents",
    "clawbot.store.protocols.conversations",
    "clawbot.store.protocols.memories",
    "clawbot.store.protocols.security",
    "clawbot.store.protocols.senders",
    "clawbot.store.protocols.turns",
    "clawbot.store.protocols.schedules",
    "clawbot.store.protocols.usage",
    "clawbot.store.records",
    "clawbot.store.ids",
}
"""What code outside the store may import of it: the Store and its repositories' protocols,
their records, ids, and the package (its factory ``open_store`` among them)."""


def store_imports_outside_the_store(root: Path) -> list[str]:
    """Every import in ``clawbot/`` and ``adapters/`` (outside ``clawbot/store/``) of a
    store module other than ``STORE_PUBLIC``, or of a backend's class (``Sqlite*``) from
    the package: the store reached below its interface."""
    store = root / "clawbot" / "store"
    offenders = []
    for folder in ("clawbot", "adapters"):
        for path in sorted((root / folder).rglob("*.py")):
            if store in path.parents:
                continue
            where = path.relative_to(root)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                    names: list[str] = []
                elif isinstance(node, ast.ImportFrom) and node.module:
                    modules = [node.module]
                    names = [alias.name for alias in node.names]
                else:
                    continue
                for module in modules:
                    if module.startswith("clawbot.store") and module not in STORE_PUBLIC:
                        offenders.append(f"{where}: {module}")
                if modules == ["clawbot.store"]:
                    for name in names:
                        submodule = f"clawbot.store.{name}"
                        is_module = (store / f"{name}.py").exists() or (store / name).is_dir()
                        if name.startswith("Sqlite") or (
                            is_module and submodule not in STORE_PUBLIC
                        ):
                            offenders.append(f"{where}: clawbot.store.{name}")
    return offenders


def test_store_imports_check_finds_backend_imports(tmp_path: Path) -> None:
    (tmp_path / "clawbot" / "store" / "protocols").mkdir(parents=True)
    (tmp_path / "clawbot" / "store" / "sqlite.py").write_text("")
    (tmp_path / "clawbot" / "store" / "records.py").write_text("")
    (tmp_path / "clawbot" / "store" / "ids.py").write_text("from clawbot.store.sqlite import X\n")
    (tmp_path / "clawbot" / "app.py").write_text(
        "from clawbot.store import SqliteStore, Store, protocols, records, sqlite\n"
        "from clawbot.store.records import JobSummary\n"
        "from clawbot.store.protocols.turns import Jobs\n"
        "from clawbot.store.protocols.sqlite_only import X\n"
        "import clawbot.store.database\n"
        "def f():\n    from clawbot.store.sqlite import SqliteStore\n"
    )
    assert store_imports_outside_the_store(tmp_path) == [
        "clawbot/app.py: clawbot.store.SqliteStore",
        "clawbot/app.py: clawbot.store.protocols",
        "clawbot/app.py: clawbot.store.sqlite",
        "clawbot/app.py: clawbot.store.protocols.sqlite_only",
        "clawbot/app.py: clawbot.store.database",
        "clawbot/app.py: clawbot.store.sqlite",
    ]


def test_code_outside_the_store_uses_only_its_interface() -> None:
    """issue 20: callers reach the store through one typed interface (``Store``, opened by
    ``open_store``), so a second backend needs no change outside ``clawbot/store/``."""
    offenders = store_imports_outside_the_store(ROOT)
    assert offenders == [], "store internals imported: " + "; ".join(offenders)


ROW_READS = {"fetchone", "lookup_here"}
"""Calls that give one row of a query."""
ROWS_READS = {"fetchall", "fetchmany"}
"""Calls that give a list of rows."""


def _is_int_index(index: ast.expr) -> bool:
    """``[2]``, ``[-1]``, ``[1:]``, ``[:8]``: a position written as a number."""
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        index = index.operand
    if isinstance(index, ast.Constant):
        return isinstance(index.value, int)
    if isinstance(index, ast.Slice):
        bounds = [b for b in (index.lower, index.upper, index.step) if b is not None]
        return bool(bounds) and all(_is_int_index(b) for b in bounds)
    return False


def _called(node: ast.expr, names: set[str]) -> bool:
    if isinstance(node, ast.Await):
        node = node.value
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
    )


def positional_row_reads(source: str) -> list[int]:
    """The lines that read a query's row by position (``row[2]``, ``found[0]``,
    ``rows[-1][0]``, ``db.execute(...).fetchone()[0]``, ``row[1:]``) instead of by name. A
    row is a name called ``row``, one bound to a ``fetchone()``, a loop variable over rows,
    or one of a list of rows; rows are a name called ``rows`` or bound to a ``fetchall()``.
    Taking one row of a list (``rows[0] if rows else None``) is not a positional read."""
    tree = ast.parse(source)
    one, many = {"row"}, {"rows"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if _called(node.value, ROW_READS):
                one |= names
            elif _called(node.value, ROWS_READS):
                many |= names

    def is_rows(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id in many) or _called(node, ROWS_READS)

    loops = [n for n in ast.walk(tree) if isinstance(n, ast.For | ast.comprehension)]
    for loop in loops:
        if isinstance(loop.target, ast.Name) and is_rows(loop.iter):
            one.add(loop.target.id)

    def is_row(node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in one
        if isinstance(node, ast.Subscript):
            return _is_int_index(node.slice) and is_rows(node.value)
        return _called(node, ROW_READS)

    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript) and _is_int_index(node.slice) and is_row(node.value)
    )


def test_positional_row_reads_are_found() -> None:
    source = (
        "async def f(db, database):\n"
        "    found = await database.fetchone('SELECT 1')\n"  # 2
        "    a = found[0]\n"  # 3
        "    rows = db.execute('SELECT 1').fetchall()\n"
        "    b = rows[-1][0]\n"  # 5
        "    c = db.execute('SELECT 1').fetchone()[0]\n"  # 6
        "    listed = await database.fetchall('SELECT 1')\n"
        "    d = [item[1:] for item in listed]\n"  # 8
        "    first = listed[0] if listed else None\n"  # one row of a list: fine
        "    (named,) = found\n"  # unpacked by name: fine
        "    vectors = embed()\n"
        "    e = vectors[0]\n"  # not a row: fine
        "    for row in rows:\n"
        "        g = row[:2]\n"  # 14
    )
    assert positional_row_reads(source) == [3, 5, 6, 8, 14]


def test_store_reads_rows_by_name() -> None:
    """issue 20: rows become named, typed records; no positional indexes into tuples."""
    offenders = []
    for path in sorted((ROOT / "clawbot" / "store").glob("*.py")):
        lines = positional_row_reads(path.read_text(encoding="utf-8"))
        offenders += [f"{path.relative_to(ROOT)}:{line}" for line in lines]
    assert offenders == [], "rows read by position: " + ", ".join(offenders)


# The layering of design.md: an import points down the pipeline. Lowest first.
FOUNDATION = (
    "clawbot",
    "clawbot.messages",
    "clawbot.errors",
    "clawbot.settings",
    "clawbot.settings.files",
    "clawbot.settings.platforms",
    "clawbot.settings.tools",
    "clawbot.settings.console",
    "clawbot.settings.fallbacks",
    "clawbot.settings.cost",
    "clawbot.settings.mcp",
    "clawbot.settings.schedules",
    "clawbot.settings.media",
    "clawbot.settings.database",
    "clawbot.settings.model",
    "clawbot.clock",
    "clawbot.lru",
    "clawbot.logs",
    "clawbot.redaction",
    "clawbot.policies",
    "clawbot.providers",
)
RECORDS = (
    "clawbot.channels.interface",
    "clawbot.routing.sessions",
    "clawbot.routing.pairing",
    "clawbot.scheduling.jobs",
    "clawbot.scheduling.backlog",
    "clawbot.runtime.usage",
    "clawbot.runtime.replies",
    "clawbot.agents.profiles",
    "clawbot.security.risk",
    "clawbot.security.approval_records",
    "clawbot.security.paused_rounds",
    "clawbot.security.audit",
    "clawbot.redaction",
    "clawbot.memory.records",
    "clawbot.memory.chunks",
    "clawbot.memory.ranking",
    "clawbot.subagents.records",
    "clawbot.schedules.records",
)
"""The records the store persists (and the pure helpers it applies), each kept in its
stage's package but below the store: they import only the foundation and each other."""
STAGES = (
    "channels",
    "agents",
    "security",
    "tools",
    "runtime",
    "mcp",
    "media",
    "memory",
    "scheduling",
    "subagents",
    "schedules",
    "commands",
    "routing",
    "setup",
)
"""The stages of clawbot/, each a package, lowest first: a stage imports the ones before it."""
TOP = (
    "clawbot.app",
    "clawbot.testing",
    "clawbot.__main__",
    "clawbot.cli",
    "clawbot.console",
)
"""What assembles the bot, and the command line: they may import everything in clawbot/."""
ADAPTERS_MAY_IMPORT = {
    "clawbot",
    "clawbot.messages",
    "clawbot.errors",
    "clawbot.settings",
    "clawbot.channels",
    "clawbot.channels.interface",
    "clawbot.channels.rendering",
}
"""adapters/ sit beside the core: the foundation and the channels' interface and rendering."""


def is_package(module: str, root: Path = ROOT) -> bool:
    return (root / module.replace(".", "/") / "__init__.py").exists()


def layer_of(module: str) -> tuple[int, str]:
    """The rank and name of a module's layer (a higher rank may import a lower one)."""
    ranks = ["foundation", "records", "store", *STAGES, "top"]
    parts = module.split(".")
    if module in FOUNDATION:
        name = "foundation"
    elif module in RECORDS:
        name = "records"
    elif module in TOP or ".".join(parts[:2]) in TOP:
        name = "top"
    elif len(parts) == 2 and is_package(module) and module != "clawbot.store":
        name = "foundation"  # a package init imports nothing (checked below)
    elif parts[:2] == ["clawbot", "store"]:
        name = "store"
    elif len(parts) > 2 and parts[1] in STAGES:
        name = parts[1]
    else:
        raise AssertionError(f"{module} is in no layer: place it in tests/test_layout.py")
    return ranks.index(name), name


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every import in clawbot/ of a module in a higher layer."""
    found = set()
    for module, targets in graph.items():
        if not module.startswith("clawbot"):
            continue
        rank, _ = layer_of(module)
        for target in targets:
            if target.startswith("clawbot") and layer_of(target)[0] > rank:
                found.add((module, target))
    return found


def test_every_module_has_a_layer() -> None:
    for module in import_graph(ROOT):
        if module.startswith("clawbot"):
            layer_of(module)


def test_imports_point_down_the_pipeline() -> None:
    """design.md: foundation, records, store, the stages in STAGES' order, then app and cli;
    an import points down, with no exception."""
    upward = sorted(
        f"{a} -> {b} ({layer_of(a)[1]} -> {layer_of(b)[1]})"
        for a, b in upward_imports(import_graph(ROOT))
    )
    assert not upward, "imports that point up the layers: " + "; ".join(upward)


def test_the_layering_check_sees_a_stage_reaching_up() -> None:
    graph = {
        "clawbot.channels.outbox": {"clawbot.routing.router"},
        "clawbot.routing.router": {"clawbot.channels.outbox", "clawbot.store.interface"},
        "clawbot.store.interface": {"clawbot.routing.sessions", "clawbot.scheduling.turns"},
        "clawbot.routing.sessions": {"clawbot.messages"},
    }
    assert upward_imports(graph) == {
        ("clawbot.channels.outbox", "clawbot.routing.router"),
        ("clawbot.store.interface", "clawbot.scheduling.turns"),
    }


def test_records_below_the_store_import_only_the_foundation_and_each_other() -> None:
    graph = import_graph(ROOT)
    allowed = set(FOUNDATION) | set(RECORDS)
    reaching = sorted(
        f"{record} -> {target}"
        for record in RECORDS
        for target in graph[record] - allowed
        if layer_of(target)[1] != "foundation"
    )
    assert not reaching, "records reaching above the foundation: " + "; ".join(reaching)


def test_package_inits_import_nothing() -> None:
    """Importing a stage's records must not run the stage: an init holds its docstring and
    ``__all__`` only (the store's, a layer of its own, names its interface)."""
    graph = import_graph(ROOT)
    heavy = sorted(
        f"{module} imports {', '.join(sorted(graph[module]))}"
        for module in graph
        if module in packages() and graph[module]
    )
    assert not heavy, "; ".join(heavy)


def test_adapters_import_only_the_foundation_and_the_channels() -> None:
    """adapters/ import clawbot's foundation and the channels' interface and rendering, and
    a platform's package never imports another platform's."""
    graph = import_graph(ROOT)
    reaching = []
    for module, targets in graph.items():
        if not module.startswith("adapters."):
            continue
        for target in targets:
            if target.startswith("clawbot") and target not in ADAPTERS_MAY_IMPORT:
                reaching.append(f"{module} -> {target}")
            elif platform_of(target) not in (None, platform_of(module)):
                reaching.append(f"{module} -> {target} (another platform)")
    assert not reaching, "adapters reaching past the channels' interface: " + "; ".join(reaching)


def platform_of(module: str) -> str | None:
    """The platform of a module of adapters/: ``adapters.slack.users`` -> ``slack``, and for
    a module directly in adapters/ its name's first word (``console_input`` -> ``console``)."""
    parts = module.split(".")
    if parts[0] != "adapters" or len(parts) < 2:
        return None
    return parts[1] if is_package(".".join(parts[:2])) else parts[1].split("_")[0]


FACADES = ("settings", "store", "testing")
"""Packages whose init is their public face: the store's names its interface, the testing
kit's is what a user's tests import (``from clawbot.testing import ScriptedModel``), the
settings' is the one model its mixin modules make up."""


def packages(root: Path = ROOT) -> dict[str, Path]:
    """The subpackages of clawbot/ and adapters/ but the facades: dotted name -> __init__.py."""
    inits = sorted((root / "clawbot").glob("*/__init__.py"))
    inits += sorted((root / "adapters").glob("*/__init__.py"))
    return {
        f"{init.parent.parent.name}.{init.parent.name}": init
        for init in inits
        if init.parent.name not in FACADES
    }


def public_modules(init: Path) -> list[str]:
    """The names of an init's ``__all__``."""
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            names = ast.literal_eval(node.value)
            assert isinstance(names, list)
            return [str(name) for name in names]
    return []


def test_an_import_from_outside_a_package_reaches_only_what_its_all_names() -> None:
    """Each package's ``__all__`` names its public modules; the rest are its own. (The
    store's public surface is STORE_PUBLIC, checked above; tests and benchmarks may reach
    anywhere.)"""
    public = {
        package: {f"{package}.{name}" for name in public_modules(init)}
        for package, init in packages().items()
    }
    private = []
    for module, targets in import_graph(ROOT).items():
        for target in targets:
            package = ".".join(target.split(".")[:2])
            outside = package in public and not module.startswith(package + ".")
            if outside and target != package and target not in public[package]:
                private.append(f"{module} -> {target}")
    assert not private, "private modules imported from outside their package: " + "; ".join(
        sorted(private)
    )


def test_each_package_init_says_what_it_owns_and_never_imports() -> None:
    for init in packages().values():
        where = init.relative_to(ROOT)
        names = public_modules(init)
        assert names, f"{where}: no __all__ naming its public modules"
        missing = [name for name in names if not (init.parent / f"{name}.py").exists()]
        assert not missing, f"{where}: __all__ names no module {missing}"
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "never" in docstring, f"{where}: the docstring does not say what it never imports"


MAX_MODULE_LINES = 500
LONG_MODULES: dict[str, int] = {}
"""Modules allowed past MAX_MODULE_LINES, each with its ceiling (none today)."""


def test_no_module_grows_past_500_lines() -> None:
    """The issue of this layout: a module over about 500 lines holds more than one thing."""
    long = []
    for folder in ("clawbot", "adapters"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            lines = path.read_text(encoding="utf-8").count("\n")
            if lines > LONG_MODULES.get(where, MAX_MODULE_LINES):
                long.append(f"{where} has {lines} lines")
    assert not long, "modules too long: " + "; ".join(long)
    stale = [w for w, n in LONG_MODULES.items() if not (ROOT / w).exists()]
    assert not stale, "LONG_MODULES lists modules that are gone: " + ", ".join(stale)
