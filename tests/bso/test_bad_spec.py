"""Generated bad BSO job specs, as Python builds them (`JobSpec(...)`, the client's
`JobSpecFromClient`) and as a body reaches the server (JSON text): each is accepted or refused
with a `ValidationError` naming the field, never another exception, and an accepted spec holds
only what its columns and its JSON answers can take.
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from basht.bso.spec import (
    INT32_MAX,
    INT64_MAX,
    JOB_ID_MAX_LENGTH,
    CreatedJob,
    JobSpec,
    JobSpecFromClient,
    spec_key,
)
from tests.bad_input import ODD_SCALARS, ODD_VALUES, fuzz_settings
from tests.bso.support import job_body

#: Values past what a column or a JSON answer holds, and text that only looks like a number.
EDGES = st.sampled_from(
    [2**31, 2**63, -(2**31) - 1, 10**400, 1e308, -0.0, "1e400", "1" * 5000, " 12 ", "12.0",
     12.5, "0x10", "\x00", "a" * (JOB_ID_MAX_LENGTH + 1), "é" * 301, [], {}, None, True]
)  # fmt: skip
VALUES = st.one_of(ODD_SCALARS, ODD_VALUES, EDGES)
MODELS = st.sampled_from([JobSpec, JobSpecFromClient])


def _body(draw: st.DrawFn) -> dict[str, Any]:
    body = job_body(draw(st.sampled_from([None, "mnist-1"])))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        key = draw(st.sampled_from(sorted(body)))
        if draw(st.sampled_from(["remove", "replace", "replace"])) == "remove":
            body.pop(key)
        else:
            body[key] = draw(VALUES)
    return body


def _check_storable(spec: BaseModel) -> None:
    """What an accepted spec holds fits its columns, and its JSON is JSON."""
    for name, value in spec.model_dump().items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, float):
                assert math.isfinite(item), (name, item)
            elif isinstance(item, int) and not isinstance(item, bool):
                top = INT64_MAX if name == "mab_seed" else INT32_MAX
                assert -top - 1 <= item <= top, (name, item)
            elif isinstance(item, str):
                assert "\x00" not in item and len(item) <= JOB_ID_MAX_LENGTH, (name, item)
    assert json.loads(spec.model_dump_json(), parse_constant=_no_constant)


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} in the JSON of a spec")


def _check_refusal(err: ValidationError) -> None:
    """A refusal names the field at fault (or the spec as a whole), as the server's 422 does."""
    first = err.errors()[0]
    assert isinstance(first["loc"], tuple) and first["msg"], err


@fuzz_settings(250)
@given(data=st.data())
def test_a_mutated_job_spec_is_accepted_or_refused_with_a_validation_error(
    data: st.DataObject,
) -> None:
    body, model = _body(data.draw), data.draw(MODELS)
    try:
        spec = model.model_validate(body)
    except ValidationError as err:
        _check_refusal(err)
        return
    _check_storable(spec)
    if isinstance(spec, JobSpecFromClient):  # as the server registers it
        assert spec_key(spec)
        created = CreatedJob.model_validate(spec.model_dump() | {"job_id": spec.job_id or "j-1"})
        _check_storable(created)


@fuzz_settings(150)
@given(data=st.data())
def test_a_job_spec_body_is_accepted_or_refused_with_a_validation_error(
    data: st.DataObject,
) -> None:
    model = data.draw(MODELS)
    if data.draw(st.booleans()):
        text = json.dumps(_body(data.draw)).encode()
    else:
        text = data.draw(st.binary(max_size=200))
    try:
        spec = model.model_validate_json(text)
    except ValidationError as err:
        _check_refusal(err)
        return
    _check_storable(spec)
