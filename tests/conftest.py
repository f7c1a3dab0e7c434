"""Test configuration: hypothesis profiles.

`ci` (the default) keeps the whole suite within CI's budget on 2 cores; `thorough` is for
deeper runs reported in issue notes: `HYPOTHESIS_PROFILE=thorough python -m pytest`.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

# Tests exercise the pipeline: programs saved by an earlier run (myir/saved.py) are not
# loaded, except where a test asks for them (tests/test_saved.py, the `myir-saved` mode).
os.environ.setdefault("MYIR_PROGRAM_CACHE", "off")

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def optimizer_on(monkeypatch):
    """For tests of what the optimizer makes (`@pytest.mark.usefixtures("optimizer_on")`):
    MYIR_OPTIMIZE=0, a run of the whole suite without the optimizer (the differential
    check), must not turn it off under them."""
    monkeypatch.delenv("MYIR_OPTIMIZE", raising=False)
