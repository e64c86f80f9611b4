from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queueing.quantity import INT64_MAX, canonical, format_quantity, parse_quantity, to_millis, to_units

GI = 2**30
MI = 2**20


@pytest.mark.parametrize(
    ("text", "resource", "expected"),
    [
        ("100m", "cpu", 100),
        ("0.5", "cpu", 500),
        (".5", "cpu", 500),
        ("5.", "cpu", 5000),
        ("2", "cpu", 2000),
        (2, "cpu", 2000),
        (0.1, "cpu", 100),  # unquoted YAML float: one tenth, not 0.1000000000000000055...
        ("1e-3", "cpu", 1),
        ("1.0001m", "cpu", 2),  # fractions of a millicore round up
        ("1n", "cpu", 1),
        ("1.5Gi", "memory", 1610612736),
        ("1e3", "memory", 1000),
        ("1E3", "memory", 1000),
        ("1e+3", "memory", 1000),
        ("1Ki", "memory", 1024),
        ("2G", "memory", 2_000_000_000),
        ("128974848", "memory", 128974848),
        ("129e6", "memory", 129_000_000),
        ("129M", "memory", 129_000_000),
        ("128974848000m", "memory", 128974848),
        ("123Mi", "memory", 128974848),
        ("1E", "memory", 10**18),  # a bare E is exa, not an exponent
        ("1Ei", "memory", 2**60),
        ("0.5", "memory", 1),  # half a byte rounds up to a whole byte
        ("+4", "nvidia.com/gpu", 4),
        ("-1", "nvidia.com/gpu", -1),  # negative quantities parse; callers reject them
        ("0", "pods", 0),
        ("000", "pods", 0),
        ("0e99999999999", "pods", 0),
    ],
)
def test_known_values(text, resource, expected):
    assert canonical(resource, text) == expected


def test_parse_is_exact():
    assert parse_quantity("1.5Gi") == Fraction(3, 2) * GI
    assert parse_quantity("100m") == Fraction(1, 10)
    assert parse_quantity("-1.5k") == -1500


def test_rounding_is_away_from_zero_like_kubernetes():
    assert to_millis("0.0001") == 1
    assert to_millis("-0.0001") == -1
    assert to_units("1.2") == 2
    assert to_units("-1.2") == -2


@pytest.mark.parametrize(
    "garbage",
    [
        "lots",
        "",
        "1.2.3",
        "5 Gi",
        " 5",
        "5 ",
        "1K",
        "1e",
        "1ee3",
        "1e3.5",
        "e3",
        "Gi",
        ".",
        "-",
        "+",
        "0x10",
        "1,000",
        "1_000",
        "inf",
        "NaN",
        "1Gi1",
        "--1",
        "1m m",
        True,
        False,
        None,
        [],
        {},
        float("inf"),
        float("nan"),
        "1e1000",
        str(2**63),
        "8Ei",
        "9223372036854775808",
        "1" * 200,
    ],
)
def test_garbage_is_rejected(garbage):
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(garbage)


def test_largest_int64_is_accepted_and_one_more_is_not():
    assert parse_quantity(str(INT64_MAX)) == INT64_MAX
    with pytest.raises(ValueError, match="too large"):
        parse_quantity(str(INT64_MAX + 1))


def test_canonical_cpu_must_fit_int64_in_millicores():
    with pytest.raises(ValueError, match="too large"):
        canonical("cpu", str(INT64_MAX))


@pytest.mark.parametrize(
    ("resource", "amount", "expected"),
    [
        ("cpu", 4000, "4"),
        ("cpu", 500, "500m"),
        ("cpu", 1500, "1500m"),
        ("cpu", 0, "0"),
        ("memory", 16 * GI, "16Gi"),
        ("memory", 1536 * MI, "1536Mi"),
        ("memory", 1024, "1Ki"),
        ("memory", 1000, "1000"),
        ("memory", 0, "0"),
        ("ephemeral-storage", 2 * GI, "2Gi"),
        ("hugepages-2Mi", 4 * MI, "4Mi"),
        ("nvidia.com/gpu", 1024, "1024"),  # counts never get byte suffixes
        ("pods", 3, "3"),
    ],
)
def test_format_quantity(resource, amount, expected):
    assert format_quantity(resource, amount) == expected


RESOURCES = st.sampled_from(["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "nvidia.com/gpu", "pods"])


@given(RESOURCES, st.integers(min_value=-INT64_MAX, max_value=INT64_MAX))
def test_format_round_trips(resource, amount):
    assert canonical(resource, format_quantity(resource, amount)) == amount


SUFFIX_VALUES = {
    "": 1,
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "e2": 100,
    "E-2": Fraction(1, 100),
    "e+0": 1,
}


@given(
    whole=st.integers(min_value=0, max_value=999_999),
    fraction=st.one_of(st.none(), st.text(alphabet="0123456789", max_size=6)),
    suffix=st.sampled_from(sorted(SUFFIX_VALUES)),
    negative=st.booleans(),
)
def test_parse_matches_decimal_arithmetic(whole, fraction, suffix, negative):
    number = str(whole) if fraction is None else f"{whole}.{fraction}"
    text = ("-" if negative else "") + number + suffix
    expected = Fraction(Decimal(number)) * SUFFIX_VALUES[suffix] * (-1 if negative else 1)
    if abs(expected) > INT64_MAX:
        with pytest.raises(ValueError, match="too large"):
            parse_quantity(text)
    else:
        assert parse_quantity(text) == expected


@given(st.one_of(st.text(max_size=40), st.text(alphabet="0123456789.+-eEinumkKMGTP ", max_size=20)))
def test_arbitrary_text_parses_or_raises_value_error(text):
    try:
        result = parse_quantity(text)
    except ValueError:
        return
    assert isinstance(result, Fraction)
    assert abs(result) <= INT64_MAX
