"""Checks of a command's paths, done before any work starts (and before any JVM starts).

Each raises a typed error naming the path: :class:`~.schema.InputSchemaError` for an input
that is not there, :class:`~.layout.PreparedLayoutError` for a prepared log that cannot be
used, :class:`OutputPathError` for an output that would overwrite or sit inside an input.
"""

from __future__ import annotations

import posixpath

import pyarrow.fs as pafs

from ..core import MLedgerError
from ._inputs import filesystem_for
from ._schema import InputSchemaError


class OutputPathError(MLedgerError, ValueError):
    """An output directory cannot be used (a file, the input itself, inside the input...)."""


def _location(path: str) -> tuple[str, str]:
    fs, p = filesystem_for(path)
    return fs.type_name, p.rstrip("/") or "/"


def _inside(a: str, b: str) -> bool:
    """Whether location ``a`` is ``b`` or lies under it."""
    (fa, pa_), (fb, pb) = _location(a), _location(b)
    return fa == fb and (pa_ == pb or pa_.startswith(pb.rstrip("/") + "/"))


def check_input_dir(path: str) -> None:
    """The input must be an existing directory."""
    fs, p = filesystem_for(path)
    info = fs.get_file_info(p)
    if info.type == pafs.FileType.NotFound:
        raise InputSchemaError(f"{path}: no such directory")
    if info.type != pafs.FileType.Directory:
        raise InputSchemaError(f"{path}: not a directory")


def check_output_dir(path: str, *inputs: str, what: str = "output") -> None:
    """An output directory must not be a file, nor overlap any of ``inputs``; its parent
    must exist (local paths) so a typo fails now rather than after the work."""
    fs, p = filesystem_for(path)
    if fs.get_file_info(p).type == pafs.FileType.File:
        raise OutputPathError(f"{path}: is a file; the {what} is a directory")
    for source in inputs:
        if _inside(path, source) or _inside(source, path):
            raise OutputPathError(f"{path}: the {what} directory overlaps the input {source}; choose another one")
    if isinstance(fs, pafs.LocalFileSystem):
        parent = posixpath.dirname(p)
        if fs.get_file_info(parent).type != pafs.FileType.Directory:
            raise OutputPathError(f"{path}: its parent directory {parent} does not exist")
