"""Kubernetes resource quantities as exact numbers.

Mirrors the grammar of apimachinery's ``resource.ParseQuantity`` so that a
manifest we admit is one the API server would also accept, and the amounts
we charge against a quota are the amounts Kubernetes will charge.  Values are
kept as ``Fraction`` until the last moment because quantities such as
``0.1`` or ``1.5Gi`` are exact decimals/binaries that floats cannot hold.
"""

from __future__ import annotations

import re
from fractions import Fraction
from numbers import Rational

# Largest value an int64 can hold: Kubernetes stores quantities in int64 when
# it can, and downstream storage (BigIntegerField) has the same ceiling.
INT64_MAX = 2**63 - 1

# Anything longer is not a hand-written quantity; the cap also keeps int()
# well below Python's digit limit for str -> int conversion.
MAX_QUANTITY_LENGTH = 128

# Beyond this the value is either absurdly large (rejected below anyway) or a
# denominator so big that building it would just burn CPU on garbage.
MAX_EXPONENT = 1000

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}

# Exponent form comes first so that "1E3" is 1000 while a bare "1E" is exa.
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)"
    r"(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?P<suffix>[eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?"
)

# Resources measured in bytes get binary suffixes when formatted; everything
# that is not cpu and not bytes is a plain count (gpus, pods, ...).
_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})


def parse_quantity(value: str | int | float | Fraction) -> Fraction:
    """Parse a quantity exactly; raise ``ValueError`` on anything Kubernetes would refuse.

    Negative quantities parse because they are valid quantities; whether a
    negative amount makes sense is the caller's decision.
    """
    text = _as_text(value)
    if isinstance(text, Fraction):
        return _checked_magnitude(text, value)
    if not text:
        raise ValueError("invalid quantity '': empty string")
    if len(text) > MAX_QUANTITY_LENGTH:
        raise ValueError(f"invalid quantity: longer than {MAX_QUANTITY_LENGTH} characters")
    match = _QUANTITY.fullmatch(text)
    if match is None or not (match["int"] or match["frac"]):
        raise ValueError(
            f"invalid quantity {text!r}: expected a number with an optional suffix such as 500m, 2, 1.5Gi or 1e3"
        )

    frac_digits = match["frac"] or ""
    mantissa = int((match["int"] or "") + frac_digits or "0")
    if mantissa == 0:
        return Fraction(0)

    suffix = match["suffix"] or ""
    binary_shift = _BINARY_SUFFIXES.get(suffix, 0)
    if suffix in _DECIMAL_SUFFIXES:
        exponent = _DECIMAL_SUFFIXES[suffix]
    elif suffix in _BINARY_SUFFIXES:
        exponent = 0
    else:
        exponent = int(suffix[1:])
    exponent -= len(frac_digits)
    if exponent > 40:
        # mantissa >= 1, so the value is at least 10**41: far past int64.
        raise ValueError(f"invalid quantity {text!r}: too large (at most {INT64_MAX})")
    if exponent < -MAX_EXPONENT:
        raise ValueError(f"invalid quantity {text!r}: exponent out of range")

    amount = Fraction(mantissa) * Fraction(10) ** exponent * 2**binary_shift
    if match["sign"] == "-":
        amount = -amount
    return _checked_magnitude(amount, text)


def to_millis(quantity: str | int | float | Fraction) -> int:
    """Thousandths of the quantity, rounded away from zero like Kubernetes' MilliValue."""
    return _round_away_from_zero(parse_quantity(quantity) * 1000)


def to_units(quantity: str | int | float | Fraction) -> int:
    """Whole units (bytes, devices, ...), rounded away from zero like Kubernetes' Value."""
    return _round_away_from_zero(parse_quantity(quantity))


def canonical(resource_name: str, value: str | int | float | Fraction) -> int:
    """The integer we store and sum: millicores for cpu, whole units for everything else."""
    amount = to_millis(value) if resource_name == "cpu" else to_units(value)
    if abs(amount) > INT64_MAX:
        raise ValueError(f"invalid quantity {_shown(value)}: too large for {resource_name}")
    return amount


def format_quantity(resource_name: str, amount: int) -> str:
    """Render a canonical integer the way a person (or kubectl) would write it."""
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise TypeError(f"amount must be an int, got {type(amount).__name__}")
    if resource_name == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if is_byte_resource(resource_name) and amount != 0:
        for suffix, shift in sorted(_BINARY_SUFFIXES.items(), key=lambda item: -item[1]):
            if amount % (1 << shift) == 0:
                return f"{amount >> shift}{suffix}"
    return str(amount)


def is_whole(quantity: Fraction) -> bool:
    """Whether the quantity is an integer number of units (required for extended resources)."""
    return quantity.denominator == 1


def _as_text(value: object) -> str | Fraction:
    # bool is an int subclass; "cpu: true" is a mistake, not the number 1.
    if isinstance(value, bool) or value is None:
        raise ValueError(f"invalid quantity {value!r}: expected a string or number")
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # Kubernetes parses an unquoted JSON number from its literal text, so
        # 0.1 means one tenth, not the binary float nearest to it; repr gives
        # the shortest text that round-trips, and 'inf'/'nan' fail the grammar.
        return repr(value)
    if isinstance(value, Rational):
        return Fraction(value)
    raise ValueError(f"invalid quantity: expected a string or number, got {type(value).__name__}")


def _checked_magnitude(amount: Fraction, original: object) -> Fraction:
    if abs(amount) > INT64_MAX:
        raise ValueError(f"invalid quantity {_shown(original)}: too large (at most {INT64_MAX})")
    return amount


def _round_away_from_zero(amount: Fraction) -> int:
    whole = -(-abs(amount.numerator) // amount.denominator)
    return whole if amount >= 0 else -whole


def is_byte_resource(resource_name: str) -> bool:
    """Whether the resource counts bytes (memory, storage, huge pages)."""
    return resource_name in _BYTE_RESOURCES or resource_name.startswith("hugepages-")


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) else str(value)
