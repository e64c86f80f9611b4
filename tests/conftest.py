from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def example_text():
    def read(name: str) -> str:
        return (EXAMPLES / f"{name}.yaml").read_text()

    return read
