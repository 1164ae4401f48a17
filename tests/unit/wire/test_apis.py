"""The APIS table (ds4.wire.apis) and the domain's SERVING_RULES: one whole row per Api."""

from __future__ import annotations

import dataclasses

import pytest

from ds4.domain.serving.exchange import SERVING_RULES, Api
from ds4.wire.apis import APIS, ApiSpec, ErrorShape, api_of_path


def test_every_api_has_exactly_one_row() -> None:
    assert set(APIS) == set(Api)
    assert [spec.api for spec in APIS.values()] == list(APIS)
    assert set(SERVING_RULES) == set(Api)


@pytest.mark.parametrize("api", list(Api), ids=lambda api: api.value)
def test_each_row_has_every_piece(api: Api) -> None:
    spec = APIS[api]
    for piece in dataclasses.fields(ApiSpec):
        assert getattr(spec, piece.name) is not None, f"{api}: no {piece.name}"
    assert spec.paths and all(path.startswith("/v1/") for path in spec.paths)
    for mapper in (spec.parse, spec.context, spec.reply, spec.stream):
        assert callable(mapper)
    assert isinstance(spec.errors, ErrorShape)
    assert callable(spec.errors.body) and callable(spec.errors.stream_frame)
    assert spec.prompt_param
    assert api.rules is SERVING_RULES[api]


def test_each_route_belongs_to_one_api() -> None:
    paths = [path for spec in APIS.values() for path in spec.paths]
    assert len(paths) == len(set(paths))
    for spec in APIS.values():
        for path in spec.paths:
            assert api_of_path(path) is spec.api
            assert api_of_path(path + "/") is spec.api
    assert api_of_path("/v1/messages/count_tokens") is Api.ANTHROPIC
    assert api_of_path("/v1/models") is None
