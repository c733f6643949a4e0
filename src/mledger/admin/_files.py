"""Files a setting names (key material, ``.htpasswd``, token and permission files, the config
file itself), read with a size cap: ``tokenSecretKey=file:///dev/zero`` or a log file named by
mistake is refused with its setting's name instead of being read until ``MemoryError``."""

from __future__ import annotations

from pathlib import Path

from ..core import ConfigError

__all__ = ["MAX_SETTING_FILE_BYTES", "read_setting_file"]

MAX_SETTING_FILE_BYTES = 16 * 1024 * 1024
"""The most a file named by a setting may hold: far above any key, ``.htpasswd``, permission
file or ``broker.conf`` (Pulsar's is 80 KB), far below what would exhaust memory."""


def read_setting_file(path: str | Path, setting: str, limit: int = MAX_SETTING_FILE_BYTES) -> bytes:
    """The bytes of ``path``, the file ``setting`` names. Blocking; reads at most ``limit`` + 1
    bytes. :class:`~mledger.core.ConfigError` naming ``setting`` and the path when the
    file cannot be read or holds more than ``limit`` bytes (``/dev/zero``, a FIFO fed forever)."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise ConfigError(f"{setting}: cannot read {str(path)!r}: {e}") from None
    if len(data) > limit:
        raise ConfigError(f"{setting}: {str(path)!r} holds more than {limit:,} bytes: not a file this setting names")
    return data
