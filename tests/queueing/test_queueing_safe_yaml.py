import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queueing.errors import FieldError, ManifestError
from queueing.safe_yaml import TooManyDocuments, load_document, load_documents
from tests.examples import examples

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def only_error(text, **kwargs) -> FieldError:
    with pytest.raises(ManifestError) as caught:
        load_document(text, **kwargs)
    assert len(caught.value.errors) == 1
    return caught.value.errors[0]


def test_loads_a_plain_mapping():
    assert load_document("a: 1\nb: [x, {c: true}]\n") == {"a": 1, "b": ["x", {"c": True}]}


def test_accepts_json_and_bytes():
    assert load_document(b'{"kind": "TFJob", "n": null}') == {"kind": "TFJob", "n": None}


def test_dates_stay_strings_as_in_kubectl():
    assert load_document("created: 2024-01-31\n") == {"created": "2024-01-31"}


def test_a_bare_equals_sign_is_a_string():
    assert load_document("args: [--opt, =]\n=: x\n") == {"args": ["--opt", "="], "=": "x"}


def test_billion_laughs_is_refused_at_the_first_anchor():
    error = only_error(BILLION_LAUGHS)
    assert error.path == "a"
    assert "anchors are not allowed" in error.message


def test_alias_is_refused():
    assert only_error("a: *x\n") == FieldError("a", "YAML aliases are not allowed")


def test_billion_laughs_is_refused_even_when_aliases_are_allowed():
    error = only_error(BILLION_LAUGHS, allow_aliases=True)
    assert "expands to more than" in error.message


def test_aliases_can_be_allowed_for_trusted_input():
    assert load_document("a: &x [1, 2]\nb: *x\n", allow_aliases=True) == {"a": [1, 2], "b": [1, 2]}


def test_self_referencing_alias_is_refused_even_when_allowed():
    assert "undefined YAML alias" in only_error("a: &x [1, *x]\n", allow_aliases=True).message


def test_alias_cannot_smuggle_in_extra_depth():
    error = only_error("a: &x [[[1]]]\nb: [[*x]]\n", allow_aliases=True, max_depth=5)
    assert error.message == "document nests deeper than 5 levels"


@pytest.mark.parametrize("text", ["[" * 10_000 + "]" * 10_000, "{a: " * 10_000 + "}" * 10_000])
def test_deep_flow_nesting_is_refused_without_recursion_error(text):
    error = only_error(text, max_bytes=10**6)
    assert error.message == "document nests deeper than 32 levels"


def test_deep_block_nesting_is_refused():
    text = "".join("  " * level + f"k{level}:\n" for level in range(100)) + "  " * 100 + "v\n"
    error = only_error(text, max_bytes=10**6)
    assert error.message == "document nests deeper than 32 levels"
    assert error.path.startswith("k0.k1.k2")


def test_nesting_at_the_limit_is_accepted():
    assert load_document("[" * 32 + "]" * 32) is not None


def test_size_limit_is_checked_before_parsing():
    # Far too deep and syntactically broken: only the size check can report it.
    with pytest.raises(ManifestError) as caught:
        load_document("[" * 300_000)
    assert caught.value.too_large is True
    assert "262144 bytes" in caught.value.errors[0].message


def test_size_limit_counts_utf8_bytes_not_characters():
    text = "a: " + "é" * 60  # 63 characters, 123 bytes
    with pytest.raises(ManifestError) as caught:
        load_document(text, max_bytes=100)
    assert caught.value.too_large is True
    assert load_document(text, max_bytes=123) == {"a": "é" * 60}


def test_size_limit_applies_to_bytes():
    with pytest.raises(ManifestError) as caught:
        load_document(b"a: 1\n" * 10, max_bytes=49)
    assert caught.value.too_large is True


def test_other_errors_are_not_too_large():
    with pytest.raises(ManifestError) as caught:
        load_document("a: [")
    assert caught.value.too_large is False


def test_two_documents_are_refused():
    assert only_error("a: 1\n---\nb: 2\n") == FieldError("", "expected one document, found several")


def test_empty_documents_around_the_one_are_ignored():
    assert load_document("---\na: 1\n---\n# nothing here\n") == {"a": 1}


@pytest.mark.parametrize("text", ["", "   \n\t\n", "# just a comment\n", "---\n", b""])
def test_empty_document(text):
    assert only_error(text) == FieldError("", "empty document")


def test_a_list_is_loaded_for_the_adapter_to_reject():
    assert load_document("- a\n- b\n") == ["a", "b"]


@pytest.mark.parametrize("raw", [b"\xff\xfe\x00a", b"a: \xc3\x28\n", b"\x80"])
def test_invalid_utf8_is_refused(raw):
    assert only_error(raw) == FieldError("", "not UTF-8 text")


def test_lone_surrogate_in_text_is_refused():
    assert only_error("a: \ud800") == FieldError("", "not UTF-8 text")


def test_duplicate_top_level_key():
    assert only_error("kind: TFJob\nkind: Job\n") == FieldError("kind", "duplicate key 'kind'")


def test_duplicate_nested_key_names_its_path():
    text = "spec:\n  tfReplicaSpecs:\n    Worker: {replicas: 1}\n    Worker: {replicas: 2}\n"
    assert only_error(text) == FieldError("spec.tfReplicaSpecs.Worker", "duplicate key 'Worker'")


def test_duplicate_key_inside_a_list_item():
    assert only_error("c:\n- {name: a, name: b}\n").path == "c[0].name"


def test_keys_equal_after_resolution_are_duplicates():
    assert only_error("1: a\n0x1: b\n").message == "duplicate key '1'"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: [1, 2\n", "invalid YAML: did not find expected ',' or ']' at line 2 column 1"),
        ("a: b: c\n", "invalid YAML: mapping values are not allowed in this context at line 1 column 5"),
        ("a:\n\tb: 1\n", "invalid YAML: found character that cannot start any token at line 2 column 1"),
        ("a: 'open\n", "invalid YAML: found unexpected end of stream at line 2 column 1"),
    ],
)
def test_syntax_errors_name_line_and_column(text, expected):
    assert only_error(text) == FieldError("", expected)


def test_control_characters_are_refused():
    assert only_error("a: \x00").message.startswith("invalid YAML: unacceptable character #x0000")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: !!python/object:os.system ls\n", "YAML tag"),
        ("a: !!binary aGVsbG8=\n", "YAML tag"),
        ("a: !!set {x}\n", "YAML tag"),
        ("a: !custom x\n", "YAML tag"),
        ("a: !!int nope\n", "'nope' is not a valid !!int"),
        ("a: !!bool maybe\n", "'maybe' is not a valid !!bool"),
        ("a: !!int\n", "'' is not a valid !!int"),
        ("a: 0b_\n", "invalid YAML value"),
        ("a: " + "9" * 5000 + "\n", "invalid YAML value"),
        ("<<: {a: 1}\n", "merge keys"),
        ("? [a, b]\n: 1\n", "mapping keys must be plain values"),
    ],
)
def test_non_json_constructs_are_refused(text, fragment):
    assert fragment in only_error(text).message


def test_explicit_core_tags_are_fine():
    assert load_document("a: !!str 123\nb: !!int '7'\nc: !!float 2\n") == {"a": "123", "b": 7, "c": 2.0}


def test_non_text_input_is_refused():
    assert only_error(12345).message == "expected text, got int"


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=10), JSON_VALUES, min_size=1, max_size=5))
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_dumped_data_loads_back_unchanged(data):
    assert load_document(yaml.safe_dump(data)) == data
    assert load_document(yaml.safe_dump(data, default_flow_style=True)) == data


YAML_ALPHABET = st.sampled_from(
    list(" \n\t:-[]{}&*!|>'\"#,?%@`~=<abcWk019.") + ["---\n", "...\n", "!!int ", "!!bool ", "&a ", "*a", "<<: "]
)


@given(st.one_of(st.text(), st.binary(), st.lists(YAML_ALPHABET, max_size=60).map("".join)))
@settings(max_examples=examples(400), deadline=None)
def test_arbitrary_input_only_ever_raises_manifest_error(text):
    try:
        load_document(text)
    except ManifestError as error:
        assert error.errors
        assert all(isinstance(e, FieldError) for e in error.errors)


@given(st.lists(YAML_ALPHABET, max_size=60).map("".join))
@settings(max_examples=examples(200), deadline=None)
def test_aliases_mode_also_only_raises_manifest_error(text):
    try:
        load_document(text, allow_aliases=True, max_depth=4)
    except ManifestError:
        pass


# --- streams of several documents (bulk submission) ---


def stream_error(text, **kwargs) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        load_documents(text, **kwargs)
    return caught.value


def test_a_stream_yields_each_document_with_its_text():
    text = "# leading\na: 1\n---\nb: [2]\n--- # note\nc: {d: 3}\n...\n"
    documents = load_documents(text)
    assert [d.value for d in documents] == [{"a": 1}, {"b": [2]}, {"c": {"d": 3}}]
    assert [d.text for d in documents] == ["# leading\na: 1\n", "---\nb: [2]\n", "--- # note\nc: {d: 3}\n...\n"]
    assert "".join(d.text for d in documents) == text


def test_empty_documents_in_a_stream_are_skipped():
    documents = load_documents("---\n---\n# nothing\n---\na: 1\n---\n---\nb: 2\n---\n")
    assert [d.value for d in documents] == [{"a": 1}, {"b": 2}]
    assert [d.text for d in documents] == ["---\na: 1\n", "---\nb: 2\n"]  # the trailing "---" is an empty one


def test_a_stream_of_one_document_is_refused_as_load_document_refuses_it():
    for text in ("a: 1\na: 2\n", "a: [\n", "", "  \n", "a: *x\n---\n", b"\xff"):
        with pytest.raises(ManifestError) as single:
            load_document(text)
        assert stream_error(text).errors == single.value.errors


def test_problems_in_a_stream_name_the_document():
    assert stream_error("a: 1\n---\nb: 1\nb: 2\n").errors == [FieldError("[1].b", "duplicate key 'b'")]
    assert stream_error("a: 1\na: 2\n---\nb: 1\n").errors == [FieldError("[0].a", "duplicate key 'a'")]
    assert stream_error("- 1\n---\n---\n- [*x]\n").errors == [FieldError("[1][0][0]", "YAML aliases are not allowed")]
    error = stream_error("a: 1\n---\nb: [\n").errors[0]
    assert error.path == "[1]" and error.message.startswith("invalid YAML: ")
    assert stream_error("a: [\n---\nb: 1\n").errors[0].path == "[0]"


def test_stream_limits():
    too_many = stream_error("a: 1\n---\nb: 2\n---\nc: 3\n", max_documents=2)
    assert isinstance(too_many, TooManyDocuments) and too_many.too_large and too_many.limit == 2
    assert [d.value for d in load_documents("a: 1\n---\n---\nb: 2\n", max_documents=2)] == [{"a": 1}, {"b": 2}]
    one_too_big = stream_error("a: 1\n---\nb: " + "x" * 100 + "\n", max_bytes=50, max_total_bytes=1000)
    assert one_too_big.too_large and one_too_big.errors == [
        FieldError("[1]", "document is larger than the limit of 50 bytes")
    ]
    all_too_big = stream_error("a: 1\n---\nb: 2\n", max_bytes=8)
    assert all_too_big.too_large and all_too_big.errors[0].path == ""
    deep = stream_error("a: 1\n---\n" + "[" * 40 + "]" * 40 + "\n", max_depth=32)
    assert deep.errors[0].path.startswith("[1]") and "deeper than 32" in deep.errors[0].message


@given(st.lists(st.dictionaries(st.text(max_size=10), JSON_VALUES, min_size=1, max_size=4), min_size=1, max_size=5))
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_dumped_streams_load_back_document_by_document(documents):
    text = yaml.safe_dump_all(documents)
    loaded = load_documents(text)
    assert [d.value for d in loaded] == documents
    assert [load_document(d.text) for d in loaded] == documents


@given(st.one_of(st.text(), st.binary(), st.lists(YAML_ALPHABET, max_size=80).map("".join)))
@settings(max_examples=examples(400), deadline=None)
def test_streams_only_ever_raise_manifest_error_and_each_text_loads_alone(text):
    try:
        single = [load_document(text)]
    except ManifestError:
        single = None
    try:
        documents = load_documents(text, max_documents=5)
    except ManifestError as error:
        assert error.errors
        assert all(isinstance(e, FieldError) for e in error.errors)
        assert single is None  # what loads as one document loads as a stream of one
        return
    if single is not None:
        assert [d.value for d in documents] == single
    assert 1 <= len(documents) <= 5
    for document in documents:
        # The text kept for each job is that document alone, meaning the same.
        assert load_document(document.text) == document.value
