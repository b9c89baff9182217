"""The house has no import cycles: every import of both packages counts (module level, inside
functions, under ``TYPE_CHECKING``), so the rooms read one way, and the library never imports
the plugin (``docs/architecture.md``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rf100vl_hf", "pytest_rf100vl")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")}


def imported(path: Path, name: str, known: set[str]) -> set[str]:
    """The project's modules that the module ``name`` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # ``from a.b import c``: c may be a name in a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    names = set(known)
    return {name: imported(path, name, names) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_module_of_either_package_is_part_of_an_import_cycle() -> None:
    assert cycles(graph()) == []


def test_the_library_never_imports_the_plugin() -> None:
    edges = graph()
    assert {(name, target) for name, targets in edges.items() if name.startswith("rf100vl_hf")
            for target in targets if target.startswith("pytest_rf100vl")} == set()


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


LAYERS: tuple[tuple[str, ...], ...] = (
    ("rf100vl_hf",),  # the library's base modules: the catalogue, errors, boxes, images, paths...
    ("rf100vl_hf.metrics", "rf100vl_hf.training"),
    ("rf100vl_hf.rf100vl", "rf100vl_hf.uouo"),  # the datasets
    ("rf100vl_hf.results",),
    ("rf100vl_hf.hub",),
    ("rf100vl_hf.cli",),
    ("pytest_rf100vl.core",),  # the plugin's shared types
    ("pytest_rf100vl.adapters",),
    ("pytest_rf100vl.engine",),  # the loop the session runs pairs through
    ("pytest_rf100vl.kinds",),
    ("pytest_rf100vl.session",),
    ("pytest_rf100vl.collect",),
    ("pytest_rf100vl", "pytest_rf100vl.commands"),  # the plugin's hooks, fixtures and hook specs
)
"""The layers of both packages, bottom up: a module may import its own layer and those below."""
HEAVY = frozenset({
    "torch", "torchvision", "transformers", "datasets", "pyarrow", "open_clip", "matplotlib", "numpy", "PIL",
    "scipy", "faster_coco_eval", "pycocotools", "ultralytics", "openai", "google", "wandb", "mlflow", "rfdetr",
    "huggingface_hub", "httpx", "pandas", "timm", "accelerate", "simplejpeg", "cv2", "pytest_benchmark",
    "xgboost", "sklearn", "rembg", "onnxruntime", "onnx",
})
"""Third-party packages that take long to import (or pull what does): a module that imports one
may be imported inside a function, so that light paths (pytest starting, ``--help``) stay light."""


def layer(name: str) -> int:
    """The layer of module ``name``: its folder's, a package's top-level module being in the
    package's own layer."""
    folders = {folder: number for number, folders in enumerate(LAYERS) for folder in folders}
    parts = name.split(".")
    for length in range(len(parts), 0, -1):
        if ".".join(parts[:length]) in folders:
            return folders[".".join(parts[:length])]
    raise AssertionError(f"{name} is in no layer")


def upward(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{name} -> {target}" for name, targets in edges.items() for target in targets
                  if layer(target) > layer(name))


def _module_level(tree: ast.Module) -> list[ast.stmt]:
    """The statements run when the module is imported: its body, into ``if`` and ``try`` blocks,
    but not ``if TYPE_CHECKING:`` (hints only)."""
    found: list[ast.stmt] = []
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, (ast.If, ast.Try)):
            pending += [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                        *(statement for handler in getattr(node, "handlers", []) for statement in handler.body)]
        found.append(node)
    return found


def _targets(node: ast.AST, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
        return [base] + [f"{base}.{alias.name}" for alias in node.names]
    return []


def _imported_modules(node: ast.AST, package: str, known: dict[str, Path]) -> set[str]:
    """The project's modules an import statement loads: ``from a import b`` loads ``a.b`` when it
    is a module, else ``a``."""
    found = set()
    targets = _targets(node, package)
    for target in targets[1:] if isinstance(node, ast.ImportFrom) else targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target:
            found.add(target)
    return found


def heavy_modules() -> set[str]:
    """The project's modules whose import, at module level and through the project's modules it
    imports so, loads a :data:`HEAVY` package."""
    known = modules()
    direct: dict[str, set[str]] = {}
    loads_heavy: set[str] = set()
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        direct[name] = set()
        for node in _module_level(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(node, package):
                if target.split(".")[0] in HEAVY:
                    loads_heavy.add(name)
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    direct[name].add(target)
    for name in known:  # importing a.b.c imports the packages a and a.b first
        parts = name.split(".")
        direct[name] |= {".".join(parts[:length]) for length in range(1, len(parts))} - {name}
    changed = True
    while changed:
        grown = {name for name, targets in direct.items() if targets & loads_heavy} - loads_heavy
        loads_heavy |= grown
        changed = bool(grown)
    return loads_heavy


ENTRY_POINTS = ("pytest_rf100vl.plugin", "rf100vl_hf.cli", "rf100vl_hf.cli.results")
"""Modules that may defer light imports too: every pytest session that has the package installed
loads the plugin, which loads the session layer only for a matrix run; every ``rf100vl-hf``
command (``--help`` too) loads the command line, which loads the results commands' modules only
to build their parsers."""


def deferred_light_imports() -> list[str]:
    """Imports of the project's light modules inside functions: they belong at the top of the file."""
    known = modules()
    heavy = heavy_modules()
    found = []
    for name, path in known.items():
        if name in ENTRY_POINTS:
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                for target in _imported_modules(node, package, known):
                    if target.split(".")[0] in PACKAGES and target not in heavy:
                        found.append(f"{name}:{node.lineno} imports {target}")
    return sorted(set(found))


def test_no_module_imports_a_higher_layer() -> None:
    assert upward(graph()) == []


def test_the_layer_check_finds_an_upward_import() -> None:
    assert upward({"rf100vl_hf.boxes": {"rf100vl_hf.results.rows"}, "pytest_rf100vl.kinds.base": {
        "pytest_rf100vl.core.pairs"}}) == ["rf100vl_hf.boxes -> rf100vl_hf.results.rows"]


def test_light_modules_are_imported_at_the_top_of_a_file() -> None:
    """An import inside a function is for a module that loads a heavy package (torch,
    datasets...); a light one's import is at the top, where a reader looks for it."""
    assert deferred_light_imports() == []
