#!/usr/bin/env python3
"""Make package faces the only doors between mledger's packages (issue 32, item 4).

    python scripts/faces_codemod.py            # rewrite src/ in place, then print what is left
    python scripts/faces_codemod.py --check    # only count; exit 1 if anything is left to do
                                               # (make lint runs it, so CI does)

A module is private when the last part of its name starts with ``_`` (``mledger.broker._topic``);
its *face* is the package just above its first private part (``mledger.broker``). Code outside a
face's package must import through the face, as import-linter's ``private_modules`` contract in
pyproject.toml checks. This script does, idempotently (a second run changes nothing):

1. every ``from <pkg>._mod import X as Y`` (absolute or relative, at any depth: top level,
   ``TYPE_CHECKING`` blocks, function bodies) whose importer lies outside ``<pkg>`` becomes
   ``from <pkg> import X as Y``, written in the same relative or absolute style;
2. each such ``X`` missing from the face is added to the face's ``__init__``: eagerly
   (``from ._mod import X as X``) when the face already imports ``._mod`` eagerly or has no lazy
   table, else lazily (the ``_LAZY`` table of :func:`mledger.core.lazy_getattr` plus an import
   under ``if TYPE_CHECKING:``); a module a face did not import before and now imports at once is
   printed, for a person to weigh (``python -X importtime``). It joins the face's ``__all__`` only when it is public API
   already (in ``mledger.__all__``): a face's ``__all__`` is what it publishes (the API reference
   renders it), the other names it imports are shared with mledger's other packages only;
3. docstrings (any string statement: module, class, function and attribute docstrings) citing
   ``mledger.<pkg>._mod.Name...`` cite ``mledger.<pkg>.Name...`` when the face exports ``Name``
   (cited from another package, a public ``Name`` of ``_mod`` joins the face as in 2), and
   ``mledger.<pkg>._mod`` alone becomes ``mledger.<pkg>`` when cited from another package; a
   package citing its own private modules and names keeps doing so (no public spelling exists).

With ``--check`` it changes nothing and exits 1 when a run would rewrite anything: an import
through a private module, or a docstring path with a public spelling (each printed with the
spelling it would get). What it cannot do it prints, for a person to fix (exit status 1 with
``--check`` too): an imported name that is itself private (``_helper``: make it public in its
module, or move the caller), ``import mledger.<pkg>._mod`` and ``from <pkg> import _mod``
statements, and docstring paths to names that the face does not export. After a rewrite, run ``ruff check --fix --select I`` and
``ruff format`` on ``src`` (the script prints the command), then ``lint-imports``.

Only the standard library is used (``ast`` for finding, exact line/column spans for editing), so
it runs on any checkout.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOTS = ("mledger", "mledger_pytest")

# a dotted path that goes through a private module of mledger: mledger.x._y[.Z...]
_PUBLIC_PATH = re.compile(r"\bmledger(?:\.[A-Za-z]\w*)+")
_PRIVATE_PATH = re.compile(r"\bmledger(?:\.[A-Za-z]\w*)*\._[a-z]\w*(?:\.[A-Za-z_]\w*)*")


def _is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def face_of(module: str) -> tuple[str, str] | None:
    """``(face, rest)`` for a module path through a private part (``mledger.core._errors`` ->
    ``("mledger.core", "_errors")``), else None."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if _is_private(part):
            return ".".join(parts[:i]), ".".join(parts[i:])
    return None


def inside(importer: str, package: str) -> bool:
    return importer == package or importer.startswith(package + ".")


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]


def find_modules(src: Path) -> dict[str, Module]:
    out: dict[str, Module] = {}
    for root in ROOTS:
        for path in sorted((src / root).rglob("*.py")):
            if "_pb2" in path.name:
                continue
            parts = list(path.relative_to(src).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            out[".".join(parts)] = Module(".".join(parts), path, is_package)
    return out


def absolute(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.package
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{node.module}" if node.module else base


# -- faces ----------------------------------------------------------------------------------------
@dataclass
class Face:
    """What a package's ``__init__`` exports, and where it gets each name."""

    module: Module
    text: str
    tree: ast.Module
    exported: dict[str, str] = field(default_factory=dict)  # name -> relative module ("._mod")
    eager_modules: set[str] = field(default_factory=set)
    lazy_table: ast.Dict | None = None
    type_checking: ast.If | None = None
    all_list: ast.List | None = None
    additions: dict[str, str] = field(default_factory=dict)  # name -> "._mod"
    public_names: frozenset[str] = frozenset()  # added names that also join __all__
    new_eager_modules: list[str] = field(default_factory=list)  # modules the face now imports at once

    @classmethod
    def load(cls, module: Module, text: str | None = None) -> Face:
        text = module.path.read_text(encoding="utf-8") if text is None else text
        tree = ast.parse(text)
        face = cls(module, text, tree)
        for stmt in tree.body:
            if isinstance(stmt, ast.ImportFrom):
                where = "." * stmt.level + (stmt.module or "")
                face.eager_modules.add(where)
                for alias in stmt.names:
                    face.exported[alias.asname or alias.name] = where
            elif isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
                face.type_checking = stmt
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if "_LAZY" in names and isinstance(stmt.value, ast.Dict):
                    face.lazy_table = stmt.value
                    for where, served in _lazy_entries(stmt.value).items():
                        for name in served:
                            face.exported[name] = where
                elif "__all__" in names and isinstance(stmt.value, ast.List):
                    face.all_list = stmt.value
                else:
                    for name in names:
                        face.exported.setdefault(name, "")
            elif isinstance(stmt, ast.FunctionDef | ast.ClassDef):
                face.exported.setdefault(stmt.name, "")
        return face

    def exports(self, name: str) -> bool:
        return name in self.exported or name in self.additions

    def add(self, name: str, rest: str) -> None:
        if not self.exports(name):
            self.additions[name] = "." + rest

    def rewrite(self) -> str:
        """The ``__init__`` text with :attr:`additions` in it."""
        if not self.additions:
            return self.text
        edits: list[tuple[int, int, str]] = []  # (line index to insert before, order, text)
        eager = {n: m for n, m in self.additions.items() if self.lazy_table is None or m in self.eager_modules}
        lazy = {n: m for n, m in self.additions.items() if n not in eager}
        lines = self.text.splitlines(keepends=True)
        if eager:
            self.new_eager_modules = sorted({m for m in eager.values() if m not in self.eager_modules})
            last_import = max(
                (s.end_lineno or s.lineno for s in self.tree.body if isinstance(s, ast.ImportFrom | ast.Import)),
                default=_after_docstring(self.tree),
            )
            edits.append((last_import, 0, "".join(_import_lines(eager, ""))))
        if lazy:
            assert self.lazy_table is not None
            if self.type_checking is None:
                raise SystemExit(f"{self.module.path}: a lazy table without an `if TYPE_CHECKING:` block")
            end = self.type_checking.body[-1].end_lineno or self.type_checking.lineno
            edits.append((end, 1, "".join(_import_lines(lazy, "    "))))
        public = [n for n in self.additions if n in self.public_names]
        replaced: list[tuple[int, int, str]] = []  # (first line index, end line index, new text)
        if self.all_list is not None and public:
            old = [e.value for e in self.all_list.elts if isinstance(e, ast.Constant)]
            new = _merge_all(old, public)
            start, end = self.all_list.lineno - 1, self.all_list.end_lineno or self.all_list.lineno
            head = lines[start][: self.all_list.col_offset]
            body = "".join(f'    "{n}",\n' for n in new)
            replaced.append((start, end, f"{head}[\n{body}]\n"))
        if lazy:
            # the table, rewritten whole with the additions in it (ruff format wraps it again)
            assert self.lazy_table is not None
            table = self.lazy_table
            start, end = table.lineno - 1, table.end_lineno or table.lineno
            if _comments("".join(lines[start:end])):
                raise SystemExit(f"{self.module.path}: comments inside the _LAZY table; add {sorted(lazy)} by hand")
            head, tail = lines[start][: table.col_offset], lines[end - 1][table.end_col_offset or 0 :]
            replaced.append((start, end, f"{head}{_lazy_table_text(table, lazy)}{tail}"))
        for start, end, text in sorted(replaced, reverse=True):
            lines[start:end] = [text]
        for index, _, text in sorted(edits, reverse=True):
            # the imports come before __all__ and the lazy table in every face
            assert all(index <= start for start, _, _ in replaced), f"{self.module.path}: an import below {text!r}"
            lines.insert(index, text)
        return "".join(lines)


def _lazy_entries(table: ast.Dict) -> dict[str, list[str]]:
    """A lazy table's ``{".module": ("Name", ...)}`` entries, as written."""
    entries: dict[str, list[str]] = {}
    for key, value in zip(table.keys, table.values, strict=True):
        if isinstance(key, ast.Constant) and isinstance(value, ast.Tuple | ast.List):
            names = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            entries.setdefault(str(key.value), []).extend(names)
    return entries


def _lazy_table_text(table: ast.Dict, added: dict[str, str]) -> str:
    """The lazy table ``table`` with the names ``added`` (name -> ".module") in it: each joins
    its module's entry, or a new entry at the end."""
    entries = _lazy_entries(table)
    for name, module in sorted(added.items()):
        entries.setdefault(module, []).append(name)
    body = ""
    for module, names in entries.items():
        quoted = ", ".join(f'"{n}"' for n in names)
        body += f'    "{module}": ({quoted}{"," if len(names) == 1 else ""}),\n'
    return "{\n" + body + "}"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _after_docstring(tree: ast.Module) -> int:
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        return first.end_lineno or 0
    return 0


def _import_lines(names: dict[str, str], indent: str) -> list[str]:
    by_module: dict[str, list[str]] = {}
    for name, module in names.items():
        by_module.setdefault(module, []).append(name)
    return [
        f"{indent}from {module} import {', '.join(f'{n} as {n}' for n in sorted(found))}\n"
        for module, found in sorted(by_module.items())
    ]


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's RUF022 "isort-style": SCREAMING_CASE, then CamelCase, then the rest
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


def _merge_all(old: list[str], added: list[str]) -> list[str]:
    new = old + [n for n in added if n not in old]
    if old == sorted(old):
        return sorted(new)
    if old == sorted(old, key=_isort_key):
        return sorted(new, key=_isort_key)
    return new


# -- imports --------------------------------------------------------------------------------------
@dataclass
class Report:
    rewritten: int = 0
    manual: list[str] = field(default_factory=list)
    docstring_paths: int = 0
    spellable: list[str] = field(default_factory=list)
    """Docstring paths through a private module that have a public spelling (rewritten, or
    left to do with ``--check``)."""


def _span(lines: list[str], node: ast.stmt) -> tuple[int, int]:
    """Character offsets of ``node`` in the text made of ``lines``."""
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:
        # ast columns are UTF-8 byte offsets
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode())

    return offset(node.lineno, node.col_offset), offset(node.end_lineno or node.lineno, node.end_col_offset or 0)


def _comments(source: str) -> list[str]:
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    except tokenize.TokenError:
        return []


def rewrite_imports(
    module: Module, text: str, faces: dict[str, Face], modules: dict[str, Module], report: Report
) -> str:
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        where = f"{module.path}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                found = face_of(alias.name)
                if found and alias.name.split(".")[0] in ROOTS and not inside(module.name, found[0]):
                    report.manual.append(f"{where}: import {alias.name} (import a name from {found[0]})")
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        target = absolute(module, node)
        if target.split(".")[0] not in ROOTS:
            continue
        found = face_of(target)
        if found is None:
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if _is_private(alias.name) and sub in modules and not inside(module.name, target):
                    report.manual.append(f"{where}: from {target} import {alias.name} (a private module)")
                elif target in faces and not inside(module.name, target) and not faces[target].exports(alias.name):
                    # an import through the face of a name the face lacks (a merge took the
                    # face's other side): the face gains it from the private module defining it
                    _add_defined(faces[target], alias.name, modules, where, report)
            continue
        face_name, rest = found
        if inside(module.name, face_name):
            continue
        private = [a.name for a in node.names if _is_private(a.name) or a.name == "*"]
        if private:
            report.manual.append(f"{where}: from {target} import {', '.join(private)} (private names)")
            continue
        face = faces.get(face_name)
        if face is None:
            report.manual.append(f"{where}: {face_name} has no __init__ to be the face of {target}")
            continue
        for alias in node.names:
            face.add(alias.name, rest)
        module_text = node.module or ""
        assert module_text.endswith(rest), (where, module_text, rest)
        new_module = module_text[: -len(rest)].rstrip(".")
        names = ", ".join(a.name if a.asname is None else f"{a.name} as {a.asname}" for a in node.names)
        start, end = _span(lines, node)
        old = text[start:end]
        indent = " " * node.col_offset
        kept = "".join(f"{c}\n{indent}" for c in _comments(old))
        edits.append((start, end, f"{kept}from {'.' * node.level}{new_module} import {names}"))
        report.rewritten += 1
    if module.is_package:
        edits += _lazy_table_edits(module, text, lines)
    return _apply(text, edits)


def _lazy_table_edits(module: Module, text: str, lines: list[str]) -> list[tuple[int, int, str]]:
    """A face's lazy table entries (``"..pkg._mod": ("Name", ...)``) that reach into another
    package's private module: they point at that package's face instead."""
    face = Face.load(module, text)
    edits: list[tuple[int, int, str]] = []
    if face.lazy_table is None:
        return edits
    becomes: dict[str, list[str]] = {}  # a key as it will read -> the keys that will read so
    for key in face.lazy_table.keys:
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        relative = key.value
        level = len(relative) - len(relative.lstrip("."))
        base = module.name
        for _ in range(level - 1):
            base = base.rpartition(".")[0]
        target = f"{base}.{relative[level:]}" if relative[level:] else base
        found = face_of(target)
        if found is None or inside(module.name, found[0]):
            becomes.setdefault(relative, []).append(relative)
            continue
        through_face = relative[: -len(found[1])].rstrip(".")
        becomes.setdefault(through_face, []).append(relative)
        start, end = _span(lines, key)  # type: ignore[arg-type]
        edits.append((start, end, repr(through_face).replace("'", '"')))
    for new, old in becomes.items():
        if len(old) > 1:  # two entries with one key: the dictionary would keep only the last
            raise SystemExit(f"{module.path}: the lazy table's entries {old} would all read {new!r}; merge them by hand")
    return edits


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    """``text`` with each ``(start, end, new)`` span replaced (spans do not overlap)."""
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


# -- docstrings -----------------------------------------------------------------------------------
def _string_statements(tree: ast.Module) -> list[ast.Constant]:
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    ]


def public_spelling(path: str, citer: Module, faces: dict[str, Face], modules: dict[str, Module]) -> str | None:
    """The spelling through its face of a dotted private path, or None where there is none. A
    public name of a private module cited from another package joins the face (shared)."""
    found = face_of(path)
    if found is None:
        return None
    face_name, rest = found
    parts = rest.split(".")
    private_parts = [p for p in parts if _is_private(p)]
    tail = parts[len(private_parts) :]
    if parts[: len(private_parts)] != private_parts:
        return None  # mledger.x._y.Z._w: a private attribute of a public name
    face = faces.get(face_name)
    if face is None:
        return None
    if not tail:
        return face_name if not inside(citer.name, face_name) else None
    if not face.exports(tail[0]) and not inside(citer.name, face_name) and not _is_private(tail[0]):
        private_module = modules.get(f"{face_name}.{'.'.join(private_parts)}")
        if private_module is not None and tail[0] in top_level_names(private_module):
            face.add(tail[0], ".".join(private_parts))
    if face.exports(tail[0]):
        return ".".join([face_name, *tail])
    return None


def _add_defined(face: Face, name: str, modules: dict[str, Module], where: str, report: Report) -> None:
    """Add ``name`` to ``face`` from the one private module of its package that defines it."""
    package_dir = face.module.path.parent
    if (package_dir / f"{name}.py").exists() or (package_dir / name / "__init__.py").exists():
        return  # a public submodule (the generated *_pb2 modules)
    prefix = face.module.name + "."
    defining = [
        m.name[len(prefix) :]
        for m in modules.values()
        if m.name.startswith(prefix)
        and _is_private(m.name[len(prefix) :].split(".")[0])
        and name in _defined_names(m.path)
    ]
    if len(defining) == 1:
        face.add(name, defining[0])
    else:
        report.manual.append(f"{where}: {face.module.name} does not export {name} (defined in: {defining or 'none'})")


def top_level_names(module: Module) -> set[str]:
    """The names ``module`` binds at its top level (definitions, assignments, imports)."""
    defined, imported = _bound_names(module.path)
    return defined | imported


def _defined_names(path: Path) -> set[str]:
    """The names ``path`` defines at its top level (not those it imports)."""
    return _bound_names(path)[0]


@cache
def _bound_names(path: Path) -> tuple[set[str], set[str]]:
    """``(defined, imported)``: the names ``path`` binds at its top level."""
    defined: set[str] = set()
    imported: set[str] = set()
    for stmt in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(stmt, ast.ImportFrom | ast.Import):
            imported.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    return defined, imported


def rewrite_docstrings(
    module: Module, text: str, faces: dict[str, Face], modules: dict[str, Module], report: Report
) -> str:
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    for const in _string_statements(tree):
        start, end = _span(lines, const)  # type: ignore[arg-type]
        source = text[start:end]

        def replace(match: re.Match[str], const: ast.Constant = const) -> str:
            new = public_spelling(match[0], module, faces, modules)
            found = face_of(match[0])
            if new is None and found is not None and inside(module.name, found[0]):
                return match[0]  # a package's own rooms, cited inside it: no public spelling needed
            if new is None:
                report.docstring_paths += 1
                report.manual.append(f"{module.path}:{const.lineno}: docstring cites {match[0]}")
                return match[0]
            report.spellable.append(f"{module.path}:{const.lineno}: {match[0]} -> {new}")
            return new

        new_source = _PRIVATE_PATH.sub(replace, source)
        for path in _PUBLIC_PATH.findall(new_source):
            _check_public_path(path, module, faces, modules, report)
        if new_source != source:
            edits.append((start, end, new_source))
    return _apply(text, edits)


def _check_public_path(
    path: str, citer: Module, faces: dict[str, Face], modules: dict[str, Module], report: Report
) -> None:
    """A docstring's ``mledger.<pkg>.Name`` from another package: the face gains ``Name`` if it
    lacks it (a merge took the face's other side)."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        face = faces.get(".".join(parts[:i]))
        if face is not None:
            name = parts[i]
            if not inside(citer.name, face.module.name) and not face.exports(name):
                if ".".join(parts[: i + 1]) not in modules:
                    _add_defined(face, name, modules, f"{citer.path} (docstring)", report)
            return


def count_docstring_paths(text: str) -> int:
    tree = ast.parse(text)
    return sum(len(_PRIVATE_PATH.findall(c.value)) for c in _string_statements(tree))


# -- main -----------------------------------------------------------------------------------------
def run(src: Path, write: bool) -> Report:
    modules = find_modules(src)
    faces = {m.name: Face.load(m) for m in modules.values() if m.is_package}
    report = Report()
    new_texts: dict[Path, str] = {}
    for module in modules.values():
        text = module.path.read_text(encoding="utf-8")
        new = rewrite_imports(module, text, faces, modules, report)
        new_texts[module.path] = new
    # docstrings after the imports: the faces' additions count as exports
    before = sum(count_docstring_paths(t) for t in new_texts.values())
    for module in modules.values():
        new_texts[module.path] = rewrite_docstrings(module, new_texts[module.path], faces, modules, report)
    after = sum(count_docstring_paths(t) for t in new_texts.values())
    print(f"cross-package imports of private modules: {report.rewritten}")
    print(f"docstring paths through private modules: {before} ({before - after} with a public spelling)")
    if not write:
        return report
    # A name a face gains joins its __all__ only when it is public API already (in mledger's own
    # __all__); the others are shared between mledger's packages through the face, not published.
    top = faces["mledger"]
    public = (
        frozenset(e.value for e in top.all_list.elts if isinstance(e, ast.Constant)) if top.all_list else frozenset()
    )
    changed = 0
    for module in modules.values():
        text = new_texts[module.path]
        face = faces.get(module.name) if module.is_package else None
        if face is not None and face.additions:
            # the face's own import rewrites (if any) first, then its additions on that text
            reloaded = Face.load(module, text)
            reloaded.additions = {n: m for n, m in face.additions.items() if not reloaded.exports(n)}
            reloaded.public_names = public
            text = reloaded.rewrite()
            for added in reloaded.new_eager_modules:
                report.manual.append(
                    f"{module.path}: the face now imports {added} at once: check the import weight of "
                    f"{module.name} (python -X importtime); if it grew, serve the names through a _LAZY "
                    "table as mledger.admin does, and run the script again"
                )
        if text != module.path.read_text(encoding="utf-8"):
            module.path.write_text(text, encoding="utf-8")
            changed += 1
    added = sum(len(f.additions) for f in faces.values())
    print(f"files changed: {changed}; names added to faces: {added}")
    for face in faces.values():
        if face.additions:
            print(f"  {face.module.name}: {', '.join(sorted(face.additions))}")
    print("next: ruff check --fix --select I src && ruff format src && lint-imports")
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parent.parent / "src")
    parser.add_argument("--check", action="store_true", help="count only; exit 1 when anything is left")
    args = parser.parse_args()
    report = run(args.src, write=not args.check)
    for line in report.manual:
        print(f"manual: {line}")
    if args.check:
        for line in report.spellable:
            print(f"to rewrite (run without --check): {line}")
        return 1 if report.rewritten or report.manual or report.spellable else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
