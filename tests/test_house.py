"""The shape of the house (issue 50): the structural rules, checked on the source tree, and the sizes worth a second
look, which are review notes and never a failure (docs/development.md says when a size is worth a look; the notes are
printed at the end of a run that includes this file, `tests/conftest.py`).

The rules: imports never run back up the layers (the model's modules import no room of the package and no script, no
module of the package imports a script, no module imports one that imports it back); every folder of modules is a
package that setup.cfg installs; a module assigns `__all__` once. What a checkpoint carries is tested in test_hub.py."""

import ast
import configparser
import functools
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ("run_mlm", "run_classification")
# Where the model starts: its three modules and the pipeline a classifier with its reading recipe carries.
MODEL_MODULES = ("configuration", "modeling", "tokenization", "text_classification_pipeline")
# The folders of `evaluate` metric scripts: data that `evaluate.load` reads (setup.cfg's package_data), not packages.
METRIC_SCRIPT_FOLDERS = "roformer_hf/metrics/*"
# Sizes worth a second look (docs/development.md, "Sizes"): notes for review, never failures.
MODULE_LINES_WORTH_A_LOOK, FUNCTION_LINES_WORTH_A_LOOK = 500, 60


def package_modules(root: Path) -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name), and the scripts by theirs."""
    modules = {name: root / f"{name}.py" for name in SCRIPTS}
    for path in sorted((root / "roformer_hf").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def tree(path: Path) -> ast.Module:
    return parsed(path.read_text(encoding="utf-8"))


@functools.cache
def parsed(source: str) -> ast.Module:
    return ast.parse(source)


def imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of `modules` that module `name` imports, inside functions too: `from .x import y` is `x`'s module
    `y` where `y` is one, else `x`."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names}
    return found & modules.keys()


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = package_modules(root)
    return {name: imports(name, path, modules) for name, path in modules.items()}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for module in graph.get(todo.pop(), ()):
            if module not in seen:
                seen.add(module)
                todo.append(module)
    return seen


# --- the rules: each returns what breaks it, [] where the house keeps it ---


def model_imports_outside_the_model(root: Path) -> list[str]:
    """The model's modules, and every module they import, are modules at the package root: none is in a room (hub/,
    conversion/, training/, metrics/) or a script. (The model names the Hub writers and the published layouts only at
    run time, where roformer_hf is installed.)"""
    graph = import_graph(root)
    model = {f"roformer_hf.{name}" for name in MODEL_MODULES}
    found = set().union(*(reachable(graph, module) for module in model)) | model
    return sorted(module for module in found if module in SCRIPTS or module.count(".") != 1)


def package_imports_of_scripts(root: Path) -> list[str]:
    """No module of the package imports a script: the scripts import the package, never the other way."""
    graph = import_graph(root)
    return sorted(
        f"{name} imports {script}" for name in graph if name not in SCRIPTS for script in graph[name] & {*SCRIPTS}
    )


def import_cycles(root: Path) -> list[str]:
    """No module imports one that imports it back (through any chain; a package's `__init__` counts as its module)."""
    graph = import_graph(root)
    return sorted(name for name in graph if name in reachable(graph, name))


def folders_not_installed(root: Path) -> list[str]:
    """Every folder of the package that holds modules is a package (`__init__.py`) that setup.cfg's `packages`
    installs, and every package setup.cfg names is one; but for the metric scripts' folders."""
    setup = configparser.ConfigParser()
    setup.read(root / "setup.cfg")
    installed = set(setup["options"]["packages"].split())
    folders = {
        ".".join(path.parent.relative_to(root).parts)
        for path in (root / "roformer_hf").rglob("*.py")
        if not path.parent.match(METRIC_SCRIPT_FOLDERS)
    }
    packages = {name for name in folders if (root / name.replace(".", "/") / "__init__.py").is_file()}
    return sorted((folders - packages) | (folders ^ installed))


def modules_assigning_all_twice(root: Path) -> list[str]:
    def assigns_all(node: ast.stmt) -> bool:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        return isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in targets
        )

    paths = package_modules(root).values()
    return sorted(str(path.relative_to(root)) for path in paths if sum(map(assigns_all, tree(path).body)) > 1)


RULES = (
    model_imports_outside_the_model,
    package_imports_of_scripts,
    import_cycles,
    folders_not_installed,
    modules_assigning_all_twice,
)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_the_house_keeps_its_rule(rule):
    assert rule(REPO_ROOT) == []


# --- the sizes worth a second look: notes for review ---


def review_notes(root: Path) -> list[str]:
    """Modules over MODULE_LINES_WORTH_A_LOOK lines, functions over FUNCTION_LINES_WORTH_A_LOOK, and the names each
    script imports from roformer_hf (and from how many of its modules): what a reviewer reads again, never a rule."""
    notes = []
    for path in package_modules(root).values():
        where = path.relative_to(root)
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES_WORTH_A_LOOK:
            notes.append(f"{where}: {lines} lines")
        functions = [node for node in ast.walk(tree(path)) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
        for function in functions:
            if (length := function.end_lineno - function.lineno + 1) > FUNCTION_LINES_WORTH_A_LOOK:
                notes.append(f"{where}:{function.lineno} {function.name}: {length} lines")
    for script in SCRIPTS:
        names, modules = 0, set()
        for node in ast.walk(tree(root / f"{script}.py")):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("roformer_hf"):
                names, modules = names + len(node.names), modules | {node.module}
        notes.append(f"{script}.py imports {names} names from {len(modules)} roformer_hf modules")
    return notes


@pytest.fixture
def house_copy(tmp_path) -> Path:
    """The package, the scripts and setup.cfg, copied to be changed."""
    root = tmp_path
    shutil.copytree(REPO_ROOT / "roformer_hf", root / "roformer_hf", ignore=shutil.ignore_patterns("__pycache__"))
    for name in (*(f"{script}.py" for script in SCRIPTS), "setup.cfg"):
        shutil.copy(REPO_ROOT / name, root / name)
    return root


def test_a_module_and_a_function_grown_by_200_lines_are_noted_and_break_no_rule(house_copy):
    grown = house_copy / "roformer_hf" / "hub" / "model_card.py"
    body = "".join(f"    total += {line}\n" for line in range(200))
    grown.write_text(grown.read_text() + f"\n\ndef grown_function():\n    total = 0\n{body}    return total\n")
    assert [rule.__name__ for rule in RULES if rule(house_copy)] == []
    notes = review_notes(house_copy)
    assert any(
        note.startswith("roformer_hf/hub/model_card.py:") and "grown_function: 203 lines" in note for note in notes
    )
    assert any(note.startswith("roformer_hf/hub/model_card.py: ") for note in notes)


def test_a_model_module_importing_a_room_or_a_script_back_is_found(house_copy):
    model = house_copy / "roformer_hf" / "configuration.py"
    model.write_text(model.read_text() + "\n\ndef card():\n    from .hub import model_card\n\n    return model_card\n")
    training = house_copy / "roformer_hf" / "training" / "errors.py"
    training.write_text(training.read_text() + "\n\ndef script():\n    import run_mlm\n\n    return run_mlm\n")
    assert "roformer_hf.hub.model_card" in model_imports_outside_the_model(house_copy)
    assert package_imports_of_scripts(house_copy) == ["roformer_hf.training.errors imports run_mlm"]
