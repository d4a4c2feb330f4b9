"""The panel in a real headless browser (Debian's chromium over the DevTools protocol)."""

from __future__ import annotations

import json

import pytest
from system_deps import requires

from harness_store import HarnessStore

from .cdp import Browser, Page, chromium_path
from .conftest import RunningPanel, open_panel
from .populate import Populated, create, proposal

pytestmark = [
    pytest.mark.anyio,
    requires(chromium_path() is not None, "needs Debian's chromium (apt-get install chromium)"),
]


async def test_a_page_sees_nothing_an_earlier_tests_page_stored(
    browser: Browser, panel: RunningPanel
) -> None:
    """The module's tests share one chromium; each page is in a browser context of its own."""
    first, context = await browser.isolated_page()
    await first.navigate(panel.base + "/")
    await first.evaluate("localStorage.setItem('left-behind', '1'); document.cookie = 'left=1'; 0")
    assert await first.evaluate("[localStorage.getItem('left-behind'), document.cookie]") == ["1", "left=1"]
    await browser.dispose(first, context)
    second, context = await browser.isolated_page()
    try:
        await second.navigate(panel.base + "/")
        assert await second.evaluate("[localStorage.getItem('left-behind'), document.cookie]") == [None, ""]
    finally:
        await browser.dispose(second, context)


async def test_the_page_lists_the_timeline_newest_first(
    page: Page, panel: RunningPanel, populated: Populated
) -> None:
    await open_panel(page, panel)
    ids = await page.wait_for(
        "document.querySelectorAll('#timeline .tl-item').length === 8 &&"
        " [...document.querySelectorAll('#timeline .tl-item')].map(li => li.dataset.refinement)"
    )
    records = [r for key in ("global", *populated.sessions) for r in populated.store(key).history()]
    assert ids == [r.id for r in sorted(records, key=lambda r: (r.created_at, r.id), reverse=True)]


async def test_the_page_lists_the_entries_by_kind_with_trust(page: Page, panel: RunningPanel) -> None:
    await open_panel(page, panel, "entries")
    rows = await page.wait_for(
        "document.querySelectorAll('table.entries tbody tr').length === 6 &&"
        " [...document.querySelectorAll('table.entries tbody tr')].map(tr => [tr.dataset.entry,"
        " tr.querySelector('.badge[class*=trust-]').textContent])"
    )
    assert rows[0] == ["sess-web-checkout/prompt/answer_style", "candidate"]
    assert ["global/memory/test_command", "verified"] in rows
    headings = await page.evaluate("[...document.querySelectorAll('.kind-group h3')].map(h => h.textContent)")
    assert headings == ["prompt (1)", "memory (3)", "skill (1)", "subagent (1)"]


async def test_opening_a_refinement_shows_its_diff_and_refusal(
    page: Page, panel: RunningPanel, populated: Populated
) -> None:
    rid = populated.ids["refused"]
    await open_panel(page, panel)
    await page.wait_for(f"document.querySelector('[data-refinement=\"{rid}\"] a.tl-link')")
    await page.evaluate(f"document.querySelector('[data-refinement=\"{rid}\"] a.tl-link').click()")
    added = await page.wait_for(
        f"document.getElementById('detail-id')?.textContent === '{rid}' &&"
        " document.querySelectorAll('#detail pre.diff .add').length &&"
        " [...document.querySelectorAll('#detail pre.diff .add')].map(s => s.textContent)"
    )
    assert "+ Run `make check` (it runs ruff, mypy and pytest); never bare pytest.\n" in added
    refusal = await page.evaluate("document.querySelector('#detail .refusal').textContent")
    assert refusal == "Refused: base system prompt is not editable"


async def test_evidence_is_quoted_and_links_to_the_session_message(
    page: Page, panel: RunningPanel, populated: Populated
) -> None:
    await open_panel(page, panel, f"refinement/{populated.ids['money']}")
    quote = await page.wait_for("document.querySelector('#detail .evidence blockquote p')?.textContent")
    assert quote == "Prices are in cents everywhere. Never use floats for money."
    await page.evaluate("document.querySelector('#detail .evidence a').click()")
    cited = await page.wait_for("document.querySelector('.msg.cited .msg-text')?.textContent")
    assert cited == quote


async def test_a_rollback_through_the_page_is_confirmed_and_recorded(
    page: Page, panel: RunningPanel, populated: Populated
) -> None:
    target = populated.ids["warehouse"]
    await open_panel(page, panel, f"refinement/{target}")
    await page.wait_for("document.getElementById('rollback')")
    await page.evaluate("document.getElementById('rollback').click()")
    await page.wait_for("document.getElementById('confirm').open")
    store = HarnessStore(populated.home / "sessions" / "sess-data-pipeline" / "harness")
    assert store.history(1)[-1].id == populated.ids["rejected"]  # nothing happens before the confirmation
    await page.evaluate("document.getElementById('confirm-ok').click()")
    toast = await page.wait_for(
        "!document.getElementById('toast').hidden && document.getElementById('toast').textContent"
    )
    last = store.history(1)[-1]
    assert last.rollback_of == target and f"new refinement {last.id}" in toast


async def test_cancelling_the_confirmation_changes_nothing(
    page: Page, panel: RunningPanel, populated: Populated
) -> None:
    await open_panel(page, panel, f"refinement/{populated.ids['warehouse']}")
    await page.wait_for("document.getElementById('rollback')")
    await page.evaluate("document.getElementById('rollback').click()")
    await page.wait_for("document.getElementById('confirm').open")
    await page.evaluate("document.getElementById('confirm-cancel').click()")
    await page.wait_for("!document.getElementById('confirm').open")
    assert populated.store("sess-data-pipeline").history(1)[-1].id == populated.ids["rejected"]


async def test_the_page_without_its_token_is_refused(page: Page, panel: RunningPanel) -> None:
    await page.navigate(panel.base + "/")
    text = await page.wait_for("document.body && document.body.innerText")
    assert text.startswith("403")


async def test_a_new_refinement_appears_on_the_open_page_without_a_reload(
    page: Page, panel: RunningPanel, populated: Populated
) -> None:
    await open_panel(page, panel)
    await page.wait_for("document.querySelectorAll('#timeline .tl-item').length === 8")
    await page.evaluate("window.__sameDocument = true")
    result = populated.store("global").apply(
        proposal(create("memory", "Deploys", "Deploy with `make release`."), summary="How to deploy"),
        scope="global",
        trigger="user",
    )
    first = await page.wait_for(
        "document.querySelectorAll('#timeline .tl-item').length === 9 &&"
        " document.querySelector('#timeline .tl-item').dataset.refinement"
    )
    assert first == result.id
    assert await page.evaluate("window.__sameDocument === true") is True


async def test_the_page_has_no_external_resources(page: Page, panel: RunningPanel) -> None:
    await open_panel(page, panel)
    urls = await page.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
    assert urls and all(u.startswith(panel.base + "/") for u in urls), json.dumps(urls)


async def _key(page: Page, key: str, code: int) -> None:
    for kind in ("keyDown", "keyUp"):
        await page.call(
            "Input.dispatchKeyEvent",
            {
                "type": kind,
                "key": key,
                "code": key,
                "windowsVirtualKeyCode": code,
                "text": "\r" if key == "Enter" else "",
            },
        )


async def test_the_keyboard_opens_and_closes_a_refinement(
    page: Page, panel: RunningPanel, populated: Populated
) -> None:
    rid = populated.ids["warehouse"]
    await open_panel(page, panel)
    await page.wait_for(f"document.querySelector('[data-refinement=\"{rid}\"] a.tl-link')")
    await page.evaluate(f"document.querySelector('[data-refinement=\"{rid}\"] a.tl-link').focus()")
    await _key(page, "Enter", 13)
    assert await page.wait_for("document.getElementById('detail-id')?.textContent") == rid
    await _key(page, "Escape", 27)
    assert (
        await page.wait_for("!document.getElementById('detail').classList.contains('open') && location.hash")
        == "#timeline"
    )


async def test_approving_a_pending_review_in_the_page_applies_it(
    page: Page, panel: RunningPanel, populated: Populated
) -> None:
    await open_panel(page, panel, "pending")
    await page.wait_for("document.querySelector('[data-proposal] button.primary')")
    await page.evaluate("document.querySelector('[data-proposal] button.primary').click()")
    await page.wait_for("document.getElementById('confirm').open")
    await page.evaluate("document.getElementById('confirm-ok').click()")
    toast = await page.wait_for(
        "!document.getElementById('toast').hidden && document.getElementById('toast').textContent"
    )
    store = populated.store("sess-web-checkout")
    applied, review = store.history(2)
    assert f"Applied proposal p-20261201-093000-0badf00d: refinement {applied.id}" in toast
    assert review.review_of == applied.id
    assert (
        await page.wait_for("document.querySelector('#view .empty')?.textContent")
        == "Nothing is waiting for review."
    )


async def test_promoting_an_entry_in_the_page_is_confirmed_and_shows_both_refinement_ids(
    page: Page, panel: RunningPanel, populated: Populated
) -> None:
    row = "tr[data-entry='sess-web-checkout/memory/money_is_integer_cents']"
    await open_panel(page, panel, "entries")
    await page.wait_for(f'document.querySelector("{row} button.promote")')
    await page.evaluate(f'document.querySelector("{row} button.promote").click()')
    await page.wait_for("document.getElementById('confirm').open")
    await page.evaluate("document.getElementById('confirm-ok').click()")
    links = await page.wait_for(
        "!document.getElementById('toast').hidden &&"
        " [...document.querySelectorAll('#toast a.rid')].map((a) => a.textContent)"
    )
    [created] = populated.store("global").history(1)
    [removed] = populated.store("sess-web-checkout").history(1)
    assert links == [f"open {created.id}", f"open {removed.id}"]
    assert (
        created.applied_edits[0].id == "money_is_integer_cents"
        and removed.applied_edits[0].action == "delete"
    )
