"""Suite-wide ordering: browser tests run last.

Playwright's sync API keeps an event loop running in the main thread for as long as its
session-scoped browser fixture lives; kernel-side tests that need to own an asyncio loop
(coalescing, background top-k) must therefore run before the first browser test starts it.
"""

from __future__ import annotations


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: "/browser/" in str(item.path).replace("\\", "/"))
