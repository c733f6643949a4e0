"""A class-data-sharing archive for the local Spark driver JVM: seconds off every start.

A fresh Spark JVM loads, parses and verifies about 15,000 classes before the first job runs;
on a 2-core machine that is roughly 2 of the 4.5 s a session takes to start, and it competes
with the replay for the same cores. HotSpot can map classes it dumped before instead
(AppCDS, JDK 13+): the first local session of a Spark installation runs with
``-XX:ArchiveClassesAtExit``, :func:`finish` waits for that JVM to write the archive when the
session ends and publishes it; later sessions start with ``-XX:SharedArchiveFile``.

The archive belongs to one Java runtime and one Spark class path, so its file name is
``spark-<installation>-<contents>.jsa``: the installation is where the java binary and the
Spark jars are (several virtualenvs keep one archive each), the contents a digest of the java
binary, the JDK's base archive and every Spark jar's name, size and mtime. An upgrade makes
a new archive and removes the installation's older one; archives unused for 30 days (a
deleted virtualenv's) are removed too. A JVM that finds an archive unusable anyway runs
without it (``-Xshare:auto``, HotSpot's default) and says nothing (its ``cds`` log is off),
so the archive is only ever an optimisation.

Where: ``$MLEDGER_CACHE_DIR`` or ``$XDG_CACHE_HOME/mledger`` or ``~/.cache/mledger``, in
``spark-cds/``; about 190 MB for Spark 4.3. ``MLEDGER_SPARK_CDS=0`` turns it off. Not used
when the session's class path is changed by configuration (extra jars or packages), when the
caller sets ``spark.driver.extraJavaOptions``, when Java or the Spark jars cannot be found,
or for a JVM this process did not start.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any

ENV_SWITCH = "MLEDGER_SPARK_CDS"
"""``0`` / ``off`` / ``false`` / ``no`` disables the archive."""
CLASSPATH_SETTINGS = (
    "spark.jars",
    "spark.jars.packages",
    "spark.driver.extraClassPath",
    "spark.driver.extraJavaOptions",
)
"""Session settings that change the driver's classes or JVM options: with any, no archive."""
QUIET_CDS_LOG = "-Xlog:cds=off -Xlog:cds+dynamic=off"
_PART_SUFFIX = ".jsa.part"
_STALE_PART_SECONDS = 3600.0
_UNUSED_ARCHIVE_SECONDS = 30 * 86400.0
_DUMP_TIMEOUT_SECONDS = 300.0


@dataclass(frozen=True)
class ClassArchive:
    """The archive for this Java runtime and Spark class path.

    ``dump_to`` is set when the JVM about to start writes the archive at its exit (to a
    private ``.part`` file that :func:`finish` publishes as ``path``)."""

    path: str
    dump_to: str | None = None

    def java_options(self) -> str:
        """The driver JVM options that use (or write) the archive, logging off."""
        if self.dump_to is not None:
            return f"-XX:ArchiveClassesAtExit={self.dump_to} {QUIET_CDS_LOG}"
        return f"-XX:SharedArchiveFile={self.path} {QUIET_CDS_LOG}"


def cache_dir() -> str:
    """Where archives live (see the module docstring)."""
    root = os.environ.get("MLEDGER_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "mledger")
    return os.path.join(root, "spark-cds")


def enabled(settings: dict[str, Any]) -> bool:
    """Whether a session built with ``settings`` may use an archive."""
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "off", "false", "no"):
        return False
    return not any(settings.get(key) for key in CLASSPATH_SETTINGS) and not os.environ.get("SPARK_CLASSPATH")


def _java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(found) if found and os.path.exists(found) else None


def _spark_jars() -> str | None:
    home = os.environ.get("SPARK_HOME")
    if not home:
        import pyspark

        home = os.path.dirname(pyspark.__file__)
    jars = os.path.join(home, "jars")
    return jars if os.path.isdir(jars) else None


def installation_id(java: str, jars_dir: str) -> str:
    """Where the java binary and the Spark jars are: one archive per installation."""
    where = f"{os.path.realpath(java)}\0{os.path.realpath(jars_dir)}".encode()
    return hashlib.sha256(where).hexdigest()[:12]


def archive_key(java: str, jars_dir: str) -> str:
    """A digest of everything the archive depends on: the java binary, the JDK's base
    archive and each jar of ``jars_dir`` (name, size, mtime)."""
    digest = hashlib.sha256()
    java_home = os.path.dirname(os.path.dirname(java))
    for path in (java, os.path.join(java_home, "lib", "server", "classes.jsa")):
        try:
            st = os.stat(path)
            digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        except OSError:
            digest.update(f"{path}\0missing\n".encode())
    digest.update(os.path.realpath(jars_dir).encode() + b"\n")
    with os.scandir(jars_dir) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            st = entry.stat()
            digest.update(f"{entry.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:24]


def prepare(settings: dict[str, Any], write: bool) -> ClassArchive | None:
    """The archive to use for a local session built with ``settings`` or, with ``write``
    and none there yet, to write (the caller then ends the session with :func:`finish`).

    None when archives are off, Java or the Spark jars cannot be found, the cache
    directory cannot be created, or writing one failed before for this key."""
    if not enabled(settings):
        return None
    java, jars = _java_binary(), _spark_jars()
    if java is None or jars is None:
        return None
    directory = cache_dir()
    try:
        os.makedirs(directory, exist_ok=True)
        name = f"spark-{installation_id(java, jars)}-{archive_key(java, jars)}"
    except OSError:
        return None
    path = os.path.join(directory, f"{name}.jsa")
    if os.path.exists(path):
        try:
            os.utime(path)  # its last use, for the removal of unused archives
        except OSError:
            pass
        return ClassArchive(path)
    if not write or os.path.exists(_failed_marker(path)):
        return None
    _remove_stale_parts(directory)
    return ClassArchive(path, dump_to=os.path.join(directory, f"{name}.{os.getpid()}.{time.time_ns()}{_PART_SUFFIX}"))


def finish(archive: ClassArchive, gateway: Any) -> bool:
    """End the driver JVM that writes ``archive`` (its session already stopped), wait for
    the dump and publish the archive; removes the installation's older archives and any
    unused for 30 days. Returns whether an archive was published. ``gateway``: PySpark's
    ``SparkContext._gateway``."""
    if archive.dump_to is None:
        return False
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - best effort: the JVM may already be gone
        pass
    if proc is not None:
        if proc.stdin is not None:
            proc.stdin.close()  # PySpark's gateway server exits when its stdin closes
        try:
            proc.wait(timeout=_DUMP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    published = proc is not None and proc.returncode == 0 and _nonempty(archive.dump_to)
    if published:
        os.replace(archive.dump_to, archive.path)
        _remove_others(os.path.dirname(archive.path), keep=archive.path)
    else:
        _remove(archive.dump_to)
        try:
            with open(_failed_marker(archive.path), "w", encoding="utf-8") as f:
                f.write(f"the JVM exited with {None if proc is None else proc.returncode} without an archive\n")
        except OSError:
            pass
    return published


def _failed_marker(path: str) -> str:
    """Present when writing ``path`` failed once: later sessions do not try again (each
    attempt costs seconds at the JVM's exit)."""
    return path[: -len(".jsa")] + ".failed"


def _nonempty(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except OSError:
        return False


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _remove_others(directory: str, keep: str) -> None:
    """Older archives (and failure markers) of ``keep``'s installation, any unused for 30
    days, and any not named as this module names them (an older mledger's)."""
    installation = _installation_of(os.path.basename(keep))
    now = time.time()
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.path == keep or not entry.name.endswith((".jsa", ".failed")):
                continue
            try:
                unused = now - entry.stat().st_mtime > _UNUSED_ARCHIVE_SECONDS
            except OSError:
                continue
            if unused or _installation_of(entry.name) in (installation, None):
                _remove(entry.path)
    _remove_stale_parts(directory)


def _installation_of(name: str) -> str | None:
    parts = name.split("-")
    return parts[1] if len(parts) == 3 and parts[0] == "spark" else None


def _remove_stale_parts(directory: str) -> None:
    """``.part`` files older than an hour: JVMs that died while writing, or sessions that
    were not ended with :func:`finish`."""
    now = time.time()
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.endswith(_PART_SUFFIX):
                try:
                    if now - entry.stat().st_mtime > _STALE_PART_SECONDS:
                        _remove(entry.path)
                except OSError:
                    pass
