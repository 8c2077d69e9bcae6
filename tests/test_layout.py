"""The shape of the code: importing starts nothing, only storage talks SQL or S3, the installed
distribution is namespaced, and the architecture map names every package."""

import ast
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import docshift
import docshift.storage

ROOT = Path(__file__).resolve().parent.parent
# what runs inside the sandbox, under LibreOffice's own Python (it needs the uno module): files, not a package
UNO = ROOT / "docshift" / "engine" / "uno"


def all_modules():
    names = ["app", "worker"]
    for package in (docshift, docshift.storage):  # storage/ is installed as docshift.storage
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            names.append(module.name)
    return names


def test_every_module_is_found():
    names = all_modules()
    assert {"docshift.storage.tasks", "docshift.web.api", "docshift.tasks.worker", "docshift.client"} <= set(names)


def test_what_runs_in_the_sandbox_is_apart():
    """``engine/uno/`` is no package the host can import, imports nothing of docshift, and nothing of docshift
    imports it: the code of the two sides of the sandbox's wall never mixes."""
    inside = sorted(p.name for p in UNO.glob("*.py"))
    assert inside == ["bridge.py", "counts.py", "excelpage.py", "excelsheet.py", "forkit.py", "mainloop.py",
                      "masters.py", "process.py", "selftest.py", "shadows.py", "webarchive.py", "written.py"]
    assert not (UNO / "__init__.py").exists()
    assert not any(name.startswith("docshift.engine.uno") for name in all_modules())
    for path in UNO.glob("*.py"):
        assert not re.search(r"^\s*(from|import) docshift", path.read_text(), re.MULTILINE), path
    host = [ROOT / "app.py", ROOT / "worker.py", *(ROOT / "docshift").rglob("*.py"), *(ROOT / "storage").rglob("*.py")]
    inside_names = "|".join(re.escape(path.stem) for path in UNO.glob("*.py"))
    for path in host:
        if UNO not in path.parents:
            assert not re.search(rf"^\s*(from|import) (docshift\.engine\.uno|{inside_names})\b",
                                 path.read_text(), re.MULTILINE), path


def test_importing_any_module_creates_nothing(tmp_path):
    data_dir = tmp_path / "not-yet"
    before = sorted(p.name for p in ROOT.iterdir())
    # Python's own bytecode cache is no thing an import of ours makes (a fresh clone has no __pycache__ yet)
    env = {**os.environ, "DOCSHIFT_DATA_DIR": str(data_dir), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    subprocess.run([sys.executable, "-c", code, *all_modules()], cwd=ROOT, env=env, check=True, timeout=60)
    assert not data_dir.exists()
    assert sorted(p.name for p in ROOT.iterdir()) == before


def test_only_storage_talks_sql_or_s3():
    storage = ROOT / "storage"
    sources = [ROOT / "app.py", ROOT / "worker.py", *(ROOT / "docshift").rglob("*.py")]
    offenders = []
    for path in sources:
        text = path.read_text()
        # huey.execute() runs a queue message; any other .execute( is SQL
        for pattern in (r"\bimport sqlite3\b", r"\bsqlite3\.", r"\bminio\b", r"(?<!huey)\.execute\("):
            if re.search(pattern, text):
                offenders.append(f"{path.relative_to(ROOT)}: {pattern}")
    assert offenders == []
    assert any("sqlite3" in p.read_text() for p in storage.glob("*.py"))


def test_one_concern_a_module():
    """storage/ is split by concern (connection, tasks, accounts, periods, ledger, liveness, s3, ...), and so is
    docshift/: no module grows past 400 lines."""
    paths = [*(ROOT / "storage").glob("*.py"), *(ROOT / "docshift").rglob("*.py")]
    lines = {str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in paths}
    assert {name: n for name, n in lines.items() if n > 400} == {}


def test_installed_distribution_is_namespaced(tmp_path):
    """``pip install .`` (not editable) puts only docshift-named entries into site-packages,
    with the schema and templates inside, and its ``docshift`` command runs."""
    source = tmp_path / "source"
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True)
    for name in tracked.stdout.splitlines():
        if (ROOT / name).exists():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("docshift-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"docshift", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "docshift/storage/schema.sql" in names and "docshift/web/templates/registered.html" in names

    fresh = tmp_path / "fresh"
    venv.create(fresh)  # without a pip of its own (seconds of ensurepip): the suite's pip installs into it
    subprocess.run([sys.executable, "-m", "pip", "--python", fresh / "bin" / "python", "install", "-q", "--no-deps",
                    str(wheel)], check=True, capture_output=True, timeout=300)
    site = next((fresh / "lib").glob("python3*/site-packages"))
    assert {p.name for p in site.iterdir()} == {"docshift", wheel.name.split("-py3")[0] + ".dist-info"}
    # the client's one dependency comes from the suite's environment, after the fresh venv's own
    deps = next(Path(sys.executable).parent.parent.glob("lib/python3*/site-packages"))
    env = {**os.environ, "PYTHONPATH": str(deps)}
    answer = subprocess.run([fresh / "bin" / "docshift", "--help"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=60)
    assert answer.returncode == 0, answer.stderr
    assert "convert" in answer.stdout and "usage" in answer.stdout


def test_every_public_function_is_annotated():
    """Every public function and method of docshift/ and storage/ (what runs in the sandbox aside) gives the
    types of its parameters and of what it returns; mypy checks them (``make test``: ``tests/typecheck.py``)."""
    missing = []
    for path in [*(ROOT / "docshift").rglob("*.py"), *(ROOT / "storage").rglob("*.py")]:
        if UNO in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                given = node.args
                params = [*given.posonlyargs, *given.args, *given.kwonlyargs, given.vararg, given.kwarg]
                bare = [p.arg for p in params if p and p.annotation is None and p.arg not in ("self", "cls")]
                if node.returns is None or bare:
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert missing == []


def test_architecture_map_names_every_package():
    """docs/architecture.md is the map: every package is in it, and everything it names exists."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    packages = {f"docshift/{p.name}/" for p in (ROOT / "docshift").iterdir()
                if (p / "__init__.py").exists() and p.name != "__pycache__"}
    packages.add("storage/")
    for package in packages:
        assert f"`{package}`" in text, f"{package} is missing from docs/architecture.md"
    for named in re.findall(r"`((?:docshift|storage|tests|bench)/[\w/.]*)`", text):
        assert (ROOT / named).exists(), f"docs/architecture.md names {named}, which does not exist"


# The layers, bottom first: a package may import its own layer's and those below, never one above.
LAYERS = [
    {"docshift.settings", "docshift.formats", "docshift.errors", "docshift.logs", "docshift.contract",
     "docshift.passwords"},
    {"docshift.storage", "docshift.engine"},
    {"docshift.accounts"},
    {"docshift.tasks"},
    {"docshift.web", "docshift.allinone", "docshift.gunicorn_conf", "docshift.gunicorn_worker"},
]
# the command customers run on their own machines: nothing of the server's
CLIENT = {"docshift.client": {"docshift.formats", "docshift.errors", "docshift.settings", "docshift.contract"}}


def package_imports():
    """{top-level docshift package or module: the others it imports} (storage/ is docshift.storage)."""
    found = {}
    for path in [*(ROOT / "docshift").rglob("*.py"), *(ROOT / "storage").rglob("*.py")]:
        if UNO in path.parents or path == ROOT / "docshift" / "__init__.py":
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        parts = ["docshift", *parts] if parts[0] == "storage" else parts
        own = ".".join(parts[:2])
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                if name.startswith("docshift.") and ".".join(name.split(".")[:2]) != own:
                    found.setdefault(own, set()).add(".".join(name.split(".")[:2]))
                elif name == "docshift" and isinstance(node, ast.ImportFrom):
                    found.setdefault(own, set()).update(f"docshift.{alias.name}" for alias in node.names)
        found.setdefault(own, set())
    return found


def test_layers_import_down_only_and_never_in_a_cycle():
    layer = {name: n for n, names in enumerate(LAYERS) for name in names}
    imports = package_imports()
    unplaced = set(imports) - set(layer) - set(CLIENT)
    assert unplaced == set(), f"packages without a layer: {unplaced}"
    upward = [f"{own} -> {other}" for own, others in imports.items() if own in layer
              for other in others if layer.get(other, len(LAYERS)) > layer[own]]
    assert upward == []
    for client, allowed in CLIENT.items():
        assert imports.get(client, set()) <= allowed
    # no cycle between packages, within a layer either
    visiting, done = set(), set()

    def visit(name, path):
        assert name not in visiting, f"an import cycle: {' -> '.join([*path, name])}"
        if name in done:
            return
        visiting.add(name)
        for other in sorted(imports.get(name, ())):
            visit(other, [*path, name])
        visiting.discard(name)
        done.add(name)

    for name in sorted(imports):
        visit(name, [])


def test_the_task_layer_sees_only_the_engines_face():
    """Outside ``engine/``, code imports ``docshift.engine`` itself and only what its ``__all__`` names: the
    offices, the sandbox, the bridge and the checks stay the engine's own."""
    import docshift.engine as engine

    offenders = []
    host = [ROOT / "app.py", ROOT / "worker.py", *(ROOT / "docshift").rglob("*.py"), *(ROOT / "storage").rglob("*.py")]
    for path in host:
        if (ROOT / "docshift" / "engine") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("docshift.engine"):
                if node.module != "docshift.engine" or {a.name for a in node.names} - set(engine.__all__):
                    offenders.append(f"{path.relative_to(ROOT)}: from {node.module} import ...")
            elif isinstance(node, ast.Import):
                offenders += [f"{path.relative_to(ROOT)}: import {a.name}" for a in node.names
                              if a.name.startswith("docshift.engine")]
    assert offenders == []
