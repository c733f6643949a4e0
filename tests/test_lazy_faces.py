"""The package faces' lazy names (``mledger.core.lazy_getattr`` over a ``{".module": ("Name",
...)}`` table): each name is the object its module defines, a name served from two modules is
refused when the face is built, and an unknown name raises ``AttributeError`` as a module does."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from mledger.core import lazy_getattr

FACES = (
    "mledger.admin",
    "mledger.broker",
    "mledger.core",
    "mledger.metrics",
    "mledger.protocol",
    "mledger.replay",
    "mledger.replay.spark",
    "mledger.rest",
    "mledger.standalone",
)


@pytest.mark.parametrize("name", FACES)
def test_every_lazy_name_of_a_face_is_its_modules_object(name: str) -> None:
    face = importlib.import_module(name)
    table = face._LAZY  # the table under test
    assert table, f"{name} serves nothing lazily"
    for module, names in table.items():
        assert isinstance(names, tuple) and names, f"{name}: {module!r} needs a tuple of names"
        source: ModuleType = importlib.import_module(module, face.__package__ or name)
        for served in names:
            assert getattr(face, served) is getattr(source, served), f"{name}.{served}"


def test_a_face_refuses_a_name_served_from_two_modules() -> None:
    with pytest.raises(ValueError, match=r"'Store' is served lazily from both '\._a' and '\._b'"):
        lazy_getattr("mledger.example", {"._a": ("Store",), "._b": ("Store",)}, {})


def test_a_face_refuses_a_string_for_a_tuple_of_names() -> None:
    with pytest.raises(TypeError, match=r"must be a tuple, got the string 'Store'"):
        lazy_getattr("mledger.example", {"._a": ("Store")}, {})  # type: ignore[dict-item]


def test_an_unknown_name_raises_attribute_error_and_a_served_one_is_cached() -> None:
    namespace: dict[str, object] = {"__package__": "mledger"}
    getter = lazy_getattr("mledger.example", {".core": ("Position",)}, namespace)
    with pytest.raises(AttributeError, match="module 'mledger.example' has no attribute 'Nope'"):
        getter("Nope")
    position = getter("Position")
    assert position is importlib.import_module("mledger.core").Position
    assert namespace["Position"] is position  # later reads go to the module's globals
