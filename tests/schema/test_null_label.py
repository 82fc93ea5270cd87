"""The null label on every user-facing path (issue 40 item 3): only null (None in Python, nil in msgpack,
null in JSON) asks for an unconditional image; a number K (the class count) is a class past the last and
is refused naming the valid range. Inside, after the check, a resolved job still carries K (the router's
arrays, the experts' requests), and a job hash stored by an older client with K still reads."""

from __future__ import annotations

import pytest

from ddm.schema import JobSpec, SchemaError
from ddm.schema.descriptor import label_name, labels_summary
from ddm.schema.sample_space import LEGACY, SampleSpace
from tests.support.descriptors import demo_descriptor

EMOJI_LIKE = SampleSpace((3, 32, 32), (-1.0, 1.0), 9, tuple(f"c{i}" for i in range(9)))


def test_null_is_the_unconditional_label_on_the_wire_and_in_json():
    spec = JobSpec("j", (3, None, None), strategy="full")
    assert spec.labels == (3, None, None) and spec.nulls(LEGACY) == 2 and spec.unconditional == 2
    assert JobSpec.decode(spec.encode()) == spec
    assert JobSpec.from_json(spec.to_json()) == spec and spec.to_dict()["labels"] == [3, None, None]
    spec.check_space(LEGACY)  # null is always in range


@pytest.mark.parametrize(("space", "k"), [(LEGACY, 10), (EMOJI_LIKE, 9)])
def test_the_class_count_as_a_number_is_refused_naming_the_range(space, k):
    with pytest.raises(SchemaError) as info:
        JobSpec("j", (3, k)).check_space(space)
    message = str(info.value)
    assert f"labels in 0..{k - 1}, or null (an unconditional image)" in message and f"[{k}]" in message


def test_the_descriptor_refuses_k_and_resolves_null_to_k_inside():
    d = demo_descriptor("learned", (5, 6, 7, 8, 9))
    with pytest.raises(SchemaError, match=r"labels in 0..9, or null \(an unconditional image\)"):
        d.check(JobSpec("j", (10,), strategy="full"))
    spec = JobSpec("j", (3, None), strategy="full")
    d.check(spec)
    assert d.nulls(spec) == 1
    resolved = d.resolve(spec)
    assert resolved.spec.labels == (3, 10)  # the internal form: the null class of label dropout
    with pytest.raises(SchemaError, match="strategy 'oracle'"):
        d.check(JobSpec("j", (None,), strategy="oracle"))  # oracle cannot route a null row, as before


def test_labels_read_by_name_whether_stored_as_null_or_as_an_old_k():
    assert label_name(None) == "unconditional" and label_name(10) == "unconditional"
    assert labels_summary((3, None, 10)) == "3,unconditional,unconditional"
