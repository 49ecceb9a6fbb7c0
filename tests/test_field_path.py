"""The one pydantic-location formatter (judgefuse.field_path), used by every room."""

from __future__ import annotations

import pydantic
import pytest

from judgefuse.field_path import field_path


@pytest.mark.parametrize(
    ("loc", "empty", "expected"),
    [
        (("judges", 0, "model"), "", "judges[0].model"),
        (("body", "items", 3, "votes", 0, "p_a"), "", "body.items[3].votes[0].p_a"),
        ((0, "x"), "", "[0].x"),
        (("quorum", "function-after[_check(), float]"), "", "quorum"),
        ((), "(top level)", "(top level)"),
        (("function-plain[f()]",), "body", "body"),
    ],
)
def test_field_path(loc: tuple[int | str, ...], empty: str, expected: str) -> None:
    assert field_path(loc, empty=empty) == expected


def test_real_pydantic_locations() -> None:
    class Inner(pydantic.BaseModel):
        n: int

    class Outer(pydantic.BaseModel):
        items: list[Inner]

    with pytest.raises(pydantic.ValidationError) as caught:
        Outer.model_validate({"items": [{"n": 1}, {"n": "x"}]})
    assert [field_path(e["loc"]) for e in caught.value.errors()] == ["items[1].n"]
