"""Where replay files live: local paths and pyarrow-supported URIs (``hdfs://``, ``s3://``, ...)."""

from __future__ import annotations

import os

import pyarrow.fs as pafs


def filesystem_for(root: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and path of a local path or URI."""
    if "://" in root:
        return pafs.FileSystem.from_uri(root)
    return pafs.LocalFileSystem(), os.path.abspath(root)
