"""The shape of the house (issue 43): the limits that tell a reviewer to look again, checked on the source tree. A
module may reach 500 lines (`modeling.py` and `tokenization.py`, single-file model modules, may pass it), a function
60; a script is its command line and `main`'s phases, importing at most 30 names from at most 12 roformer_hf modules;
`training/` holds at most 12 modules and its wings as packages; a module assigns `__all__` once."""

import ast
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = REPO_ROOT / "roformer_hf"
SCRIPTS = ("run_mlm.py", "run_classification.py")
SOURCES = sorted(PACKAGE.rglob("*.py")) + [REPO_ROOT / script for script in SCRIPTS]


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def roformer_hf_imports(script: str) -> tuple[int, int]:
    """How many names a script imports from roformer_hf, and from how many of its modules (`import roformer_hf.x`
    counts as one name of its module)."""
    names, modules = 0, set()
    for node in ast.walk(tree(REPO_ROOT / script)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("roformer_hf"):
            names, modules = names + len(node.names), modules | {node.module}
        elif isinstance(node, ast.Import):
            ours = [alias.name for alias in node.names if alias.name.startswith("roformer_hf")]
            names, modules = names + len(ours), modules | set(ours)
    return names, len(modules)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_script_imports_its_phases_from_few_modules(script):
    names, modules = roformer_hf_imports(script)
    assert names <= 30 and modules <= 12, f"{script} imports {names} names from {modules} roformer_hf modules"


def test_training_holds_twelve_modules_and_its_wings_as_packages():
    training = PACKAGE / "training"
    modules = [path.name for path in training.glob("*.py") if path.name != "__init__.py"]
    wings = [path for path in training.iterdir() if path.is_dir() and path.name != "__pycache__"]
    assert len(modules) <= 12, sorted(modules)
    assert wings and all((wing / "__init__.py").is_file() for wing in wings)


def test_modules_and_functions_stay_short_enough_to_read_whole():
    long_modules = {
        str(path.relative_to(REPO_ROOT)): lines
        for path in SOURCES
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > 500
        and path.name not in ("modeling.py", "tokenization.py")
    }
    long_functions = {
        f"{path.relative_to(REPO_ROOT)}:{node.name}": node.end_lineno - node.lineno + 1
        for path in SOURCES
        for node in ast.walk(tree(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > 60
    }
    assert long_modules == {} and long_functions == {}


def test_a_module_assigns_its_all_once():
    def assigns_all(node: ast.stmt) -> bool:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        return isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in targets
        )

    twice = [str(path.relative_to(REPO_ROOT)) for path in SOURCES if sum(map(assigns_all, tree(path).body)) > 1]
    assert twice == []
