"""The code's layout holds: modules small enough to read, no two of them importing each other, and the report
(pure pandas) importable without MLflow."""

import ast
import subprocess
import sys

from conftest import ROOT

PACKAGE = ROOT / "sift_bench"
MAX_LINES = 400


def module_name(path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, object]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_at_load(path, name: str, known: set[str]) -> set[str]:
    """The sift_bench modules `path` imports when it is loaded (imports inside functions wait until called)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], *filter(None, [base])])
            # `from a import b` imports the module a.b when there is one, else a name of a.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(target for target in targets if target in known and target != name)
    return found


def test_no_two_modules_import_each_other():
    known = modules()
    graph = {name: imports_at_load(path, name, set(known)) for name, path in known.items()}
    cycles = []

    def visit(name, trail):
        for target in graph[name]:
            if target in trail:
                cycles.append(" -> ".join([*trail[trail.index(target):], target]))
            elif target not in done:
                visit(target, [*trail, target])
        done.add(name)

    done: set[str] = set()
    for name in graph:
        if name not in done:
            visit(name, [name])
    assert not cycles, "import cycles:\n" + "\n".join(sorted(set(cycles)))


def test_no_module_is_longer_than_the_limit():
    long = {module_name(path): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert {name: lines for name, lines in long.items() if lines > MAX_LINES} == {}


def test_the_report_imports_no_mlflow():
    probe = subprocess.run([sys.executable, "-c", "import sys, sift_bench.report, sift_bench.report.markdown, "
                            "sift_bench.report.budget, sift_bench.report.status, sift_bench.report.notes; "
                            "assert 'mlflow' not in sys.modules, 'mlflow imported'"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr


MAX_FUNCTION_LINES = 60


def functions(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_function_is_longer_than_the_limit():
    long = {f"{module_name(path)}.{node.name}": node.end_lineno - node.lineno + 1
            for path in PACKAGE.rglob("*.py") for node in functions(path)}
    assert {name: lines for name, lines in long.items() if lines > MAX_FUNCTION_LINES} == {}


def test_an_import_inside_a_function_says_why():
    """Imports sit at the top of a module; one that waits for its function (an optional package, a heavy one only a
    rare path needs, one the report must not load) has a comment above it in its function saying which."""
    silent = []
    for path in PACKAGE.rglob("*.py"):
        lines = path.read_text().splitlines()
        for function in functions(path):
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    above = lines[function.lineno - 1:node.lineno]
                    if not any("#" in line for line in above):
                        silent.append(f"{module_name(path)}:{node.lineno}")
    assert silent == []
