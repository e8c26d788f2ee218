"""Fixtures for the webhook tests."""

from __future__ import annotations

from typing import Any

import pytest

from webhooks.admission import AdmissionContext
from webhooks.server import create_app


@pytest.fixture
def webhook_app():
    """Factory: the webhook aiohttp app with an optional context."""

    def make(ctx: AdmissionContext | None = None, **kw: Any):
        return create_app(ctx, **kw)

    return make
