"""The driver JVM's class-data-sharing archive (mledger.replay.spark._class_archive)."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mledger.replay.spark import _class_archive as class_archive
from mledger.replay.spark._class_archive import ClassArchive, archive_key, finish, prepare


@pytest.fixture
def installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake Java and Spark installation and an empty cache directory."""
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("#!/bin/sh\n")
    (java_home / "lib" / "server").mkdir(parents=True)
    (java_home / "lib" / "server" / "classes.jsa").write_bytes(b"base")
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    for name in ("spark-core.jar", "spark-sql.jar"):
        (jars / name).write_bytes(b"jar " + name.encode())
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    monkeypatch.setenv("MLEDGER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(class_archive.ENV_SWITCH, raising=False)
    monkeypatch.delenv("SPARK_CLASSPATH", raising=False)
    return tmp_path


class FakeJvm:
    """Stands in for PySpark's gateway and its JVM process: "dumps" on exit."""

    def __init__(self, archive: ClassArchive | None, returncode: int = 0, dump: bytes = b"classes") -> None:
        self.proc = self
        self.stdin = None
        self.returncode: int | None = None
        self.shut_down = False
        self._archive, self._code, self._dump = archive, returncode, dump

    def shutdown(self) -> None:
        self.shut_down = True

    def wait(self, timeout: float | None = None) -> int:
        if self._archive is not None and self._archive.dump_to and self._dump:
            Path(self._archive.dump_to).write_bytes(self._dump)
        self.returncode = self._code
        return self._code


def _jar(installation: Path) -> Path:
    return installation / "spark" / "jars" / "spark-core.jar"


def test_key_is_stable_and_changes_with_any_jar_or_the_jdk(installation: Path) -> None:
    java = str(installation / "jdk" / "bin" / "java")
    jars = str(installation / "spark" / "jars")
    key = archive_key(java, jars)
    assert archive_key(java, jars) == key
    _jar(installation).write_bytes(b"a rebuilt jar, another size")
    rebuilt = archive_key(java, jars)
    assert rebuilt != key
    (installation / "spark" / "jars" / "extra.jar").write_bytes(b"x")
    assert archive_key(java, jars) != rebuilt
    added = archive_key(java, jars)
    (installation / "jdk" / "lib" / "server" / "classes.jsa").write_bytes(b"regenerated base archive")
    assert archive_key(java, jars) != added


def test_no_archive_yet_writes_one_only_when_asked(installation: Path) -> None:
    assert prepare({}, write=False) is None
    archive = prepare({}, write=True)
    assert archive is not None and archive.dump_to is not None
    assert os.path.dirname(archive.dump_to) == os.path.dirname(archive.path) == str(installation / "cache" / "spark-cds")
    assert archive.dump_to.endswith(".jsa.part") and archive.path.endswith(".jsa")
    assert archive.java_options().startswith(f"-XX:ArchiveClassesAtExit={archive.dump_to} ")
    assert "-Xlog:cds=off" in archive.java_options()


def test_finish_publishes_the_dump_and_later_sessions_map_it(installation: Path) -> None:
    archive = prepare({}, write=True)
    assert archive is not None
    jvm = FakeJvm(archive)
    assert finish(archive, jvm) is True
    assert jvm.shut_down
    assert Path(archive.path).read_bytes() == b"classes"
    assert archive.dump_to is not None and not os.path.exists(archive.dump_to)
    again = prepare({}, write=True)
    assert again == ClassArchive(archive.path)
    assert again.java_options().startswith(f"-XX:SharedArchiveFile={archive.path} ")


def test_publishing_replaces_the_installations_older_archive_and_removes_stale_files(installation: Path) -> None:
    old = prepare({}, write=True)
    assert old is not None
    finish(old, FakeJvm(old))
    directory = Path(old.path).parent
    other_venv = directory / "spark-0123456789ab-000000000000000000000000.jsa"
    abandoned = directory / "spark-ba9876543210-000000000000000000000000.jsa"
    other_venv.write_bytes(b"another installation's archive, in use")
    abandoned.write_bytes(b"a deleted virtualenv's archive")
    (directory / "spark-0123456789abcdef01234567.jsa").write_bytes(b"named by an older mledger")
    os.utime(abandoned, (time.time() - 40 * 86400, time.time() - 40 * 86400))
    _jar(installation).write_bytes(b"upgraded spark")
    new = prepare({}, write=True)
    assert new is not None and new.path != old.path and new.dump_to is not None
    stale, fresh = directory / "spark-x.1.1.jsa.part", directory / "spark-y.2.2.jsa.part"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"being written by another process")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    finish(new, FakeJvm(new))
    assert sorted(p.name for p in directory.iterdir()) == sorted([Path(new.path).name, other_venv.name, fresh.name])


def test_using_an_archive_marks_it_used(installation: Path) -> None:
    archive = prepare({}, write=True)
    assert archive is not None
    finish(archive, FakeJvm(archive))
    long_ago = time.time() - 20 * 86400
    os.utime(archive.path, (long_ago, long_ago))
    assert prepare({}, write=False) == ClassArchive(archive.path)
    assert os.path.getmtime(archive.path) > long_ago + 86400


def test_a_failed_dump_is_not_published_and_not_tried_again(installation: Path) -> None:
    archive = prepare({}, write=True)
    assert archive is not None
    assert finish(archive, FakeJvm(archive, returncode=1)) is False
    assert not os.path.exists(archive.path)
    assert archive.dump_to is not None and not os.path.exists(archive.dump_to)
    assert prepare({}, write=True) is None


def test_an_empty_dump_is_a_failure(installation: Path) -> None:
    archive = prepare({}, write=True)
    assert archive is not None
    assert finish(archive, FakeJvm(archive, dump=b"")) is False
    assert not os.path.exists(archive.path)


def test_a_session_that_uses_an_archive_has_nothing_to_finish(installation: Path) -> None:
    archive = prepare({}, write=True)
    assert archive is not None
    finish(archive, FakeJvm(archive))
    jvm = FakeJvm(None)
    assert finish(ClassArchive(archive.path), jvm) is False
    assert not jvm.shut_down


@pytest.mark.parametrize("value", ["0", "off", "False", "no"])
def test_switched_off_by_the_environment(installation: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(class_archive.ENV_SWITCH, value)
    assert prepare({}, write=True) is None


@pytest.mark.parametrize("setting", class_archive.CLASSPATH_SETTINGS)
def test_not_used_when_settings_change_the_class_path_or_jvm_options(installation: Path, setting: str) -> None:
    assert prepare({setting: "something"}, write=True) is None
    assert prepare({setting: ""}, write=True) is not None


def test_not_used_without_java(installation: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(installation / "no-such-jdk"))
    assert prepare({}, write=True) is None


_SESSION_SCRIPT = textwrap.dedent("""
    import sys
    from mledger.replay.spark._session import build_session, stop_session, writes_class_archive
    spark = build_session("local[1]", write_class_archive=True, driver_memory="512m")
    args = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    rows = spark.range(0, 1000, 1, 2).selectExpr("sum(id) as s").collect()
    print("SUM", rows[0]["s"])
    print("WRITES", writes_class_archive())
    print("ARGS", " ".join(a for a in args if a.startswith("-XX:")))
    stop_session(spark)
""")


@pytest.mark.spark
def test_first_local_session_writes_the_archive_and_the_next_maps_it(tmp_path: Path) -> None:
    """Two real driver JVMs (the suite's shared session cannot show a JVM's start)."""
    env = {**os.environ, "MLEDGER_CACHE_DIR": str(tmp_path / "cache")}
    env.pop(class_archive.ENV_SWITCH, None)

    def run() -> dict[str, str]:
        done = subprocess.run([sys.executable, "-c", _SESSION_SCRIPT], env=env, capture_output=True, text=True,
                              timeout=300, check=True)
        return dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.split(" ", 1)[0].isupper())

    first = run()
    assert first["SUM"] == str(sum(range(1000)))
    assert first["WRITES"] == "True"
    assert "-XX:ArchiveClassesAtExit=" in first["ARGS"]
    archives = list((tmp_path / "cache" / "spark-cds").glob("*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 10_000_000
    assert not list((tmp_path / "cache" / "spark-cds").glob("*.part"))

    try:
        second = run()
        assert second["SUM"] == str(sum(range(1000)))
        assert second["WRITES"] == "False"
        assert f"-XX:SharedArchiveFile={archives[0]}" in second["ARGS"].split()
        assert "-XX:FreqInlineSize=120" in second["ARGS"].split()
    finally:
        archives[0].unlink()  # ~190 MB: not left behind in pytest's kept temporary directories
