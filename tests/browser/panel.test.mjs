// The memory panel in headless Chromium against the real fleet (started and seeded by
// tests/integration/api/test_panel_browser.py): ada's facts came from conversations a
// worker committed, one pinned fact has a held change; eve has a fact made of markup.
// Every change made through the page is then checked through the API, over HTTP.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { env } from 'node:process';
import { after, before, describe, it } from 'node:test';
import {
  API, activeFacts, assertClean, call, chainOf, launch, lowContrast, openPage, tabUntil,
  unnamedControls,
} from './harness.mjs';

const ADA = env.MEMFLEET_PANEL_TOKEN;
const EVE = env.MEMFLEET_PANEL_TOKEN_EVE;
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
  + "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

// The fact item whose text is exactly `text`, within `scope` (a page or a locator).
const fact = (scope, text) => {
  const page = typeof scope.page === 'function' ? scope.page() : scope;
  const exact = new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
  return scope.locator('li.fact', { has: page.locator('.fact-text', { hasText: exact }) });
};
const status = (page, words) => page.locator('#status', { hasText: words }).waitFor();

function assertPanelHeaders(headers) {
  assert.equal(headers['content-security-policy'], CSP);
  assert.equal(headers['x-content-type-options'], 'nosniff');
  assert.equal(headers['referrer-policy'], 'no-referrer');
  assert.equal(headers['cache-control'], 'no-cache');
}

async function firstLoadFigures(page) {
  return page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const resources = performance.getEntriesByType('resource');
    const sum = (test, field) => resources.filter((r) => test(r.name))
      .reduce((total, r) => total + r[field], 0);
    const isStatic = (name) => name.includes('/panel/static/');
    const isData = (name) => name.includes('/users/');
    return {
      page_transfer_bytes: nav.transferSize + sum(isStatic, 'transferSize'),
      page_body_bytes: nav.decodedBodySize + sum(isStatic, 'decodedBodySize'),
      page_files: 1 + resources.filter((r) => isStatic(r.name)).length,
      data_transfer_bytes: sum(isData, 'transferSize'),
      data_requests: resources.filter((r) => isData(r.name)).length,
      first_contentful_paint_ms: performance.getEntriesByName('first-contentful-paint')[0]
        ?.startTime,
      facts_shown_ms: performance.getEntriesByName('panel-ready')[0]?.startTime,
    };
  });
}

describe('ada works her memory through the panel', () => {
  let page;
  let watch;
  let response;

  before(async () => {
    ({ page, watch } = await openPage(browser));
    page.setDefaultTimeout(10_000);
    response = await page.goto(`${API}/panel#token=${ADA}`);
    await page.locator('#panel:not([hidden])').waitFor();
  });

  it('loads with strict headers, and the token is gone from the address', async () => {
    assertPanelHeaders(response.headers());
    for (const name of ['panel.js', 'api.js', 'view.js', 'dialogs.js', 'panel.css', 'icon.svg']) {
      const file = await fetch(`${API}/panel/static/${name}`);
      assert.equal(file.status, 200);
      assertPanelHeaders(Object.fromEntries(file.headers));
    }
    assert.equal((await fetch(`${API}/panel/static/secret.py`)).status, 404);
    assert.ok(!page.url().includes(ADA) && !page.url().includes('#'));
    const kept = await page.evaluate(() => ({
      href: window.location.href, storage: sessionStorage.length + localStorage.length,
      cookie: document.cookie,
    }));
    assert.ok(!kept.href.includes(ADA));
    assert.deepEqual([kept.storage, kept.cookie], [0, '']);
    writeFileSync(env.MEMFLEET_PANEL_METRICS, JSON.stringify(await firstLoadFigures(page)));
  });

  it('shows what the conversations produced: grouped, pinned first, said and held', async () => {
    const profile = page.locator('section.scope', { hasText: 'About you, for every assistant' });
    for (const text of ['Lives in Paris', 'Works as nurse', 'Likes green tea',
      'Favourite city is Porto']) {
      await fact(profile, text).waitFor();
    }
    const luna = page.locator('section.scope', { hasText: 'Between you and the assistant' });
    assert.match(await luna.locator('h3').textContent(), /“?luna”?/);
    await fact(luna, 'Wants this assistant to call them Captain').waitFor();
    const facts = profile.locator('section.category', { hasText: 'Facts about you' });
    assert.equal(await facts.locator('li.fact .fact-text').first().textContent(), 'Lives in Paris');
    const paris = fact(page, 'Lives in Paris');
    assert.match(await paris.getAttribute('class'), /pinned/);
    assert.match(await paris.locator('.meta').textContent(),
      /Pinned.*Said in a conversation on .+Holds since /);
    const proposal = page.locator('#proposals li.proposal');
    assert.match(await proposal.textContent(),
      /suggested changing Lives in Paris to Lives in Lisbon\..*you pinned this fact/);
    await page.screenshot({ path: join(env.MEMFLEET_PANEL_SHOTS, 'panel.png'), fullPage: true });
    await page.setViewportSize({ width: 375, height: 800 });
    await page.screenshot({ path: join(env.MEMFLEET_PANEL_SHOTS, 'panel-phone.png') });
    await page.setViewportSize({ width: 1100, height: 900 });
  });

  it('shows her notes apart from her facts, and removes one', async () => {
    const item = page.locator('#notes li.note-item', { hasText: 'kitchen renovation' });
    await item.waitFor();
    assert.match(await item.textContent(),
      /^The user is thinking about a kitchen renovation, budget about \$40k\.Mentioned on /);
    assert.equal(await page.locator('#facts li', { hasText: 'kitchen renovation' }).count(), 0);
    await item.getByRole('button', { name: 'Remove' }).click();
    await status(page, 'Removed. The note');
    const listed = await call(ADA, 'GET', '/users/ada/notes?state=all');
    assert.deepEqual(listed.body.notes.map((n) => n.superseded_reason), ['removed']);
    assert.equal(await page.locator('#notes').isVisible(), false);
  });

  it('corrects a fact: a manual version supersedes it in the same chain', async () => {
    // By keyboard alone: Tab to the fact's Correct button, Enter opens the dialog with
    // the old wording selected, typing replaces it, Tab reaches Save, Enter saves.
    const nurse = (await activeFacts(ADA, 'ada')).get('Works as nurse');
    await page.evaluate(() => document.querySelector('a.skip').focus());
    await tabUntil(page, (a) => a.action === 'edit' && a.factId === String(nurse.id));
    await page.keyboard.press('Enter');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'edit-text');
    await page.keyboard.type('Works as a midwife');
    await tabUntil(page, (a) => a.id === 'edit-save', { max: 3 });
    await page.keyboard.press('Enter');
    await status(page, 'Corrected');
    const active = await activeFacts(ADA, 'ada');
    assert.ok(active.has('Works as a midwife') && !active.has('Works as nurse'));
    assert.deepEqual((await chainOf(ADA, 'ada', nurse.id)).map(
      (v) => [v.text, v.superseded_reason, v.source_kind]),
    [['Works as nurse', 'updated', 'extracted'], ['Works as a midwife', null, 'manual']]);
    // Its history says so; Escape closes it and focus returns to the button.
    const history = fact(page, 'Works as a midwife').getByRole('button', { name: 'History' });
    await history.click();
    const dialog = page.locator('#history-dialog[open]');
    await dialog.locator('li.version').first().waitFor();
    assert.match(await dialog.textContent(),
      /Works as nurse.*Never held.*Corrected by you.*Works as a midwife.*Current version/s);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    assert.equal(await history.evaluate((b) => b === document.activeElement), true);
  });

  it('pins a fact with the keyboard alone, its focus visible', async () => {
    const tea = (await activeFacts(ADA, 'ada')).get('Likes green tea');
    // From the page's first control (the skip link), by Tab alone.
    await page.evaluate(() => document.querySelector('a.skip').focus());
    const { presses, info } = await tabUntil(page,
      (a) => a.action === 'pin' && a.factId === String(tea.id));
    assert.equal(info.text, 'Pin');
    assert.notEqual(info.outline, 'none', 'the focused button shows its focus');
    await page.keyboard.press('Enter');
    await status(page, 'Pinned');
    assert.equal((await activeFacts(ADA, 'ada')).get('Likes green tea').pinned, true);
    const focused = await page.evaluate(() => document.activeElement.textContent);
    assert.equal(focused, 'Unpin', 'focus stays on the button it pressed');
    console.log(`keyboard: ${presses} Tab presses from the skip link to the pin button`);
  });

  it('removes a fact: its chain ends as removed by the user', async () => {
    const porto = (await activeFacts(ADA, 'ada')).get('Favourite city is Porto');
    await page.evaluate(() => document.querySelector('a.skip').focus());
    await tabUntil(page, (a) => a.action === 'remove' && a.factId === String(porto.id));
    await page.keyboard.press('Space');
    await status(page, 'Removed');
    assert.equal((await activeFacts(ADA, 'ada')).has('Favourite city is Porto'), false);
    assert.deepEqual((await chainOf(ADA, 'ada', porto.id)).map((v) => v.superseded_reason),
      ['removed']);
    assert.equal(await fact(page, 'Favourite city is Porto').count(), 0);
  });

  it('accepts the change a conversation proposed to a pinned fact', async () => {
    const paris = (await activeFacts(ADA, 'ada')).get('Lives in Paris');
    await page.locator('#proposals').getByRole('button', { name: 'Accept' }).click();
    await status(page, 'Accepted');
    const active = await activeFacts(ADA, 'ada');
    assert.ok(!active.has('Lives in Paris'));
    assert.equal(active.get('Lives in Lisbon').pinned, true);
    assert.deepEqual((await chainOf(ADA, 'ada', paris.id)).map(
      (v) => [v.text, v.superseded_reason]),
    [['Lives in Paris', 'updated'], ['Lives in Lisbon', null]]);
    const open = await call(ADA, 'GET', '/users/ada/held-proposals');
    assert.deepEqual(open.body.proposals, []);
    assert.equal(await page.locator('#proposals').isVisible(), false);
    await fact(page, 'Lives in Lisbon').waitFor();
  });

  it('a correction on a stale view is refused, shown, and the typed text kept', async () => {
    const lisbon = (await activeFacts(ADA, 'ada')).get('Lives in Lisbon');
    await fact(page, 'Lives in Lisbon').getByRole('button', { name: 'Correct' }).click();
    await page.locator('#edit-text').fill('Lives in Porto now');
    // Meanwhile another tab (here: the API) corrects the same version.
    const behind = await call(ADA, 'PATCH', `/users/ada/facts/${lisbon.id}`,
      { text: 'Lives in Lisbon, Alfama' });
    assert.equal(behind.status, 200);
    await page.getByRole('button', { name: 'Save' }).click();
    const conflict = page.locator('#edit-conflict');
    await conflict.waitFor();
    assert.match(await conflict.textContent(),
      /changed while you were writing.*Lives in Lisbon, Alfama/);
    assert.equal(await page.locator('#edit-text').inputValue(), 'Lives in Porto now');
    await fact(page, 'Lives in Lisbon, Alfama').waitFor(); // the page behind is current
    await page.getByRole('button', { name: 'Save' }).click();
    await status(page, 'Corrected');
    const chain = await chainOf(ADA, 'ada', lisbon.id);
    assert.deepEqual(chain.map((v) => v.text),
      ['Lives in Paris', 'Lives in Lisbon', 'Lives in Lisbon, Alfama', 'Lives in Porto now']);
    // The panel's correction says it was written there; the API's plain PATCH: api.
    assert.deepEqual(chain.slice(2).map((v) => v.written_via), ['api', 'panel']);
  });

  it('a remove on a stale view shows the current state and says so', async () => {
    const joke = [...(await activeFacts(ADA, 'ada')).values()].find(
      (f) => f.agent_id === 'luna' && f.text.startsWith('Shares a running joke'));
    assert.equal((await call(ADA, 'DELETE', `/users/ada/facts/${joke.id}`)).status, 200);
    await page.locator(`li.fact[data-fact-id="${joke.id}"]`)
      .getByRole('button', { name: 'Remove' }).click();
    await page.locator('#alert', { hasText: 'changed meanwhile' }).waitFor();
    assert.equal(await page.locator(`li.fact[data-fact-id="${joke.id}"]`).count(), 0);
  });

  it('adds a fact for one assistant; markup in it stays text', async () => {
    const markup = '<b>bold</b> & <script>window.pwned = 1</script>';
    await page.getByRole('button', { name: 'Add a fact' }).click();
    await page.locator('#add-text').fill(markup);
    await page.locator('#add-category').selectOption('preference');
    await page.locator('#add-about').selectOption('luna');
    await page.locator('#add-dialog').getByRole('button', { name: 'Add' }).click();
    await status(page, 'Added');
    const added = (await activeFacts(ADA, 'ada')).get(markup);
    assert.deepEqual([added.scope, added.agent_id, added.category, added.source_kind,
      added.written_via], ['relationship', 'luna', 'preference', 'manual', 'panel']);
    const shown = page.locator(`li.fact[data-fact-id="${added.id}"] .fact-text`);
    assert.equal(await shown.textContent(), markup);
    assert.deepEqual(await page.evaluate(() => [
      document.querySelectorAll('#facts b, #facts script').length, window.pwned]), [0, undefined]);
  });

  it('searches the facts', async () => {
    await page.getByLabel('Search your facts').fill('Porto');
    await page.getByLabel('Search your facts').press('Enter');
    await page.locator('#facts-summary', { hasText: 'match' }).waitFor();
    await fact(page, 'Lives in Porto now').waitFor();
    await page.getByRole('button', { name: 'Show all' }).click();
    await fact(page, 'Likes green tea').waitFor();
  });

  it('switches memory off: nothing reaches a prompt any more', async () => {
    await page.getByRole('switch', { name: 'Remember things from my conversations' }).uncheck();
    await status(page, 'Memory is off');
    const consent = await call(ADA, 'GET', '/users/ada/consent');
    assert.deepEqual(consent.body, { enabled: false, chosen: true });
    const prompt = await call(ADA, 'GET', '/users/ada/known-facts');
    assert.equal(prompt.body.count, 0);
    await fact(page, 'Likes green tea').waitFor(); // still shown to her
  });

  it('downloads her data', async () => {
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download my data' }).click(),
    ]);
    assert.match(download.suggestedFilename(), /^memory-export-\d{4}-\d\d-\d\d\.json$/);
    const data = JSON.parse(readFileSync(await download.path(), 'utf-8'));
    assert.equal(data.user_id, 'ada');
    assert.ok(data.facts.some((f) => f.text === 'Works as nurse' && f.superseded_at));
    await status(page, 'downloaded');
  });

  it('names every control, traps focus in its dialogs, and fits a phone', async () => {
    const { unnamed, described } = await unnamedControls(page);
    assert.deepEqual(unnamed, []);
    // Each fact's buttons are described by its text: "Correct" is heard with the fact.
    assert.ok(described.includes('Correct: Likes green tea'), described.join(' | '));
    assert.deepEqual(await page.evaluate(() => [document.documentElement.lang,
      document.querySelectorAll('h1').length, document.querySelectorAll('main').length,
      [...document.querySelectorAll('input, select, textarea')].filter(
        (f) => f.labels.length === 0).length]), ['en', 1, 1, 0]);
    await page.locator('#add-open').focus();
    await page.keyboard.press('Enter');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'add-text');
    for (let i = 0; i < 12; i += 1) {
      await page.keyboard.press('Tab');
      const inside = await page.evaluate(() => document.activeElement === document.body
        || Boolean(document.activeElement.closest('dialog[open]')));
      assert.ok(inside, 'Tab stays within the open dialog');
    }
    await page.keyboard.press('Escape');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'add-open');

    await page.setViewportSize({ width: 375, height: 800 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(overflow <= 375, `the page is ${overflow} px wide at a 375 px viewport`);
    const box = await fact(page, 'Likes green tea').getByRole('button', { name: 'Remove' })
      .boundingBox();
    assert.ok(box.x >= 0 && box.x + box.width <= 375);
  });

  it('reads at WCAG AA contrast in the light and the dark scheme', async () => {
    // Every text on the page as it stands (facts, a pinned one, held changes, notes,
    // buttons), checked against the colour actually behind it, in both schemes.
    for (const colorScheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme });
      assert.deepEqual(await lowContrast(page), [], `${colorScheme} scheme`);
    }
    await page.emulateMedia({ colorScheme: 'light' });
  });

  it('made no request elsewhere, broke no CSP rule, fired no dialog', async () => {
    await assertClean(page, watch, [409]); // the two stale views above
  });
});

describe('eve: a fact that is markup, then forget everything', () => {
  let page;
  let watch;

  before(async () => {
    ({ page, watch } = await openPage(browser, { width: 375, height: 800 }));
    await page.goto(`${API}/panel#token=${EVE}`);
    await page.locator('#panel:not([hidden])').waitFor();
  });

  it('shows the characters of <img src=x onerror=alert(1)>, creates no element', async () => {
    await fact(page, env.MEMFLEET_PANEL_INJECTION).waitFor();
    const note = page.locator('#notes li.note-item .fact-text');
    assert.equal(await note.textContent(),
      `The user is thinking about ${env.MEMFLEET_PANEL_INJECTION}.`);
    assert.equal(await page.evaluate(() => document.querySelectorAll('img').length), 0);
    assert.deepEqual(watch.dialogs, []);
  });

  it('a stale held change can only be dismissed', async () => {
    const proposal = page.locator('#proposals li.proposal');
    assert.match(await proposal.textContent(),
      /suggested changing Lives in Rome to Lives in Milan\..*can only be dismissed/);
    assert.equal(await proposal.getByRole('button', { name: 'Accept' }).isDisabled(), true);
    await proposal.getByRole('button', { name: 'Dismiss' }).click();
    await status(page, 'Dismissed');
    const all = await call(EVE, 'GET', '/users/eve/held-proposals?state=all');
    assert.deepEqual(all.body.proposals.map((p) => [p.text, p.resolution, p.resolved_by]),
      [['Lives in Milan', 'dismissed', 'user']]);
    assert.ok((await activeFacts(EVE, 'eve')).has('Lives in Rome, Trastevere'));
    assert.equal(await page.locator('#proposals').isVisible(), false);
  });

  it('forgets everything only once the word is typed', async () => {
    await page.getByRole('button', { name: 'Forget everything…' }).click();
    const confirm = page.locator('#forget-confirm');
    assert.equal(await confirm.isDisabled(), true);
    await page.getByLabel('Type forget to confirm').fill('forg');
    assert.equal(await confirm.isDisabled(), true);
    await page.getByLabel('Type forget to confirm').fill('forget');
    await page.getByLabel('Also stop remembering from now on').check();
    await confirm.click();
    await status(page, 'Everything was forgotten, and memory is now off');
    const facts = await call(EVE, 'GET', '/users/eve/facts');
    assert.equal(facts.body.count, 0);
    assert.deepEqual((await call(EVE, 'GET', '/users/eve/notes?state=all')).body.notes, []);
    assert.deepEqual((await call(EVE, 'GET', '/users/eve/consent')).body,
      { enabled: false, chosen: true });
    await page.locator('#facts-summary', { hasText: 'Nothing is remembered' }).waitFor();
    await assertClean(page, watch);
  });
});

describe('a memory service that does not answer at first', () => {
  it('says so and loads on Try again, the token still in hand', async () => {
    const { context, page, watch } = await openPage(browser);
    // The API answers 503 (PostgreSQL away) until the route is let through.
    await page.route('**/users/**', (route) => route.fulfill({
      status: 503, contentType: 'application/json', body: '{"detail": "unavailable"}' }));
    await page.goto(`${API}/panel#token=${ADA}`);
    await page.locator('#unavailable:not([hidden])').waitFor();
    assert.equal(await page.locator('#panel').isVisible(), false);
    await page.unroute('**/users/**');
    await page.getByRole('button', { name: 'Try again' }).click();
    await page.locator('#panel:not([hidden])').waitFor();
    await fact(page, 'Likes green tea').waitFor();
    assert.equal(await page.locator('#unavailable').isVisible(), false);
    await assertClean(page, watch, [503]);
    await context.close();
  });
});

describe('links that cannot open a memory say so', () => {
  for (const [name, fragment, words] of [
    ['no token', '', 'It has no sign-in token'],
    ['an expired token', `#token=${env.MEMFLEET_PANEL_TOKEN_EXPIRED}`, 'It has expired'],
    ['a token the API refuses', `#token=${env.MEMFLEET_PANEL_TOKEN_FORGED}`,
      'The memory service does not accept its sign-in token'],
    ['a fragment that is no token', '#token=not-a-jwt', 'It has no sign-in token'],
  ]) {
    it(`${name}`, async () => {
      const { context, page, watch } = await openPage(browser);
      await page.goto(`${API}/panel${fragment}`);
      await page.locator('#signed-out:not([hidden])', { hasText: words }).waitFor();
      assert.equal(await page.locator('#panel').isVisible(), false);
      assert.ok(!page.url().includes('token'));
      assert.deepEqual(await page.evaluate(() => window.cspViolations), []);
      await context.close();
      assert.deepEqual(watch.errors, []);
    });
  }
});
