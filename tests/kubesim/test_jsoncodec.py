import json

from kubesim import jsoncodec


def test_dumps_is_compact_json_in_insertion_order():
    obj = {"b": 1, "a": [1.5, None, True, "é"], "c": {"z": {}, "y": []}}
    data = jsoncodec.dumps(obj)
    assert isinstance(data, bytes)
    assert b" " not in data
    assert json.loads(data) == obj
    assert list(json.loads(data)) == ["b", "a", "c"]


def test_what_orjson_refuses_still_serializes():
    # A CRD's free-form spec may hold integers beyond 64 bits; orjson refuses them.
    huge = {"spec": {"n": 2**70}}
    assert json.loads(jsoncodec.dumps(huge)) == huge
    assert jsoncodec.clone(huge) == huge


def test_clone_is_a_deep_copy():
    obj = {"metadata": {"labels": {"a": "1"}}, "items": [{"x": 1}]}
    copy = jsoncodec.clone(obj)
    assert copy == obj
    copy["metadata"]["labels"]["a"] = "2"
    copy["items"][0]["x"] = 2
    assert obj == {"metadata": {"labels": {"a": "1"}}, "items": [{"x": 1}]}
