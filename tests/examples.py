"""How many examples a property test runs. The `ci` profile (the default: `make test` and
CI) runs each test's full count, as written at its test; `HYPOTHESIS_PROFILE=dev` runs a
tenth of it (at least 10) for a quick pass while working. tests/conftest.py registers both
profiles with Hypothesis, for the tests that state no count of their own."""

import os

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")


def examples(count: int) -> int:
    return count if PROFILE != "dev" else max(10, count // 10)
