"""Shared pytest configuration: Hypothesis profiles.

``ci`` (the default) is small, derandomized, has no deadline and skips shrinking, so the suite is fast and
reproducible on a shared machine and a failure is reported at once (with its reproduction blob); ``dev``
explores more and shrinks failures to minimal examples. Select one with ``HYPOTHESIS_PROFILE=dev``.

CUDA tests run in numba's CUDA simulator unless the environment says otherwise (``NUMBA_ENABLE_CUDASIM=0`` on a
machine with a GPU runs them on the device); numba reads the setting when it is first imported, so it is set here,
before any test imports funclib.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

from hypothesis import HealthCheck, Phase, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile(
    "ci",
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    print_blob=True,
    suppress_health_check=_SLOW_OK,
)
settings.register_profile("dev", max_examples=200, deadline=None, suppress_health_check=_SLOW_OK)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# jit's background compilation (the user default) runs a cold program eagerly while a worker process compiles its
# kernels: tests of jit would then check the NumPy impls instead of the kernels, and every test would start
# workers on CI's two cores. The suite compiles in the foreground; tests/test_background_compile.py turns it on.
os.environ.setdefault("FUNCLIB_BACKGROUND_COMPILE", "0")
