# SPDX-License-Identifier: Apache-2.0
"""The soak runs build the same lab as the functional suite."""

from tests.functional.conftest import fusectl  # noqa: F401
from tests.functional.conftest import lab_factory  # noqa: F401
from tests.functional.conftest import pytest_collection_modifyitems  # noqa
