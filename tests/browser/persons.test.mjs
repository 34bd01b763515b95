// The people in kim's life on the memory panel, in headless Chromium against the real
// fleet (started and seeded by tests/integration/api/test_panel_persons_browser.py):
// her conversations made her sister Ana, her boss Tom and her brother Leo, each with a
// fact; she made a friend by hand whose name is markup. Every change made through the
// page is then checked through the API, over HTTP.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { env } from 'node:process';
import { after, before, describe, it } from 'node:test';
import {
  API, activeFacts, assertClean, call, chainOf, launch, lowContrast, openPage, tabUntil,
  unnamedControls,
} from './harness.mjs';

const KIM = env.MEMFLEET_PANEL_TOKEN_KIM;
const MARKUP = env.MEMFLEET_PANEL_INJECTION;
const ANA_FACT = "The user's sister Ana is vegetarian";
const TOM_FACT = "The user's boss Tom moved to Berlin";
const LEO_FACT = "The user's brother Leo plays chess";

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const exactly = (text) => new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
// The fact item whose text is exactly `text`, within `scope` (a page or a locator).
const fact = (scope, text) => {
  const page = typeof scope.page === 'function' ? scope.page() : scope;
  return scope.locator('li.fact', { has: page.locator('.fact-text', { hasText: exactly(text) }) });
};
// The section of the person whose heading is exactly `label`.
const person = (page, label) => page.locator('section.person', {
  has: page.locator('h3', { hasText: exactly(label) }) });
const status = (page, words) => page.locator('#status', { hasText: words }).waitFor();

async function persons(query = '') {
  const { status: code, body } = await call(KIM, 'GET', `/users/kim/persons${query}`);
  assert.equal(code, 200);
  return body.persons;
}
const byName = async (name, query) => (await persons(query)).find(
  (p) => p.display_name === name);
const noElementFromMarkup = (page) => page.evaluate(
  () => document.querySelectorAll('img, b, script:not([src])').length);

describe('kim sees and corrects the people in her life', () => {
  let page;
  let watch;

  before(async () => {
    ({ page, watch } = await openPage(browser));
    page.setDefaultTimeout(10_000);
    await page.goto(`${API}/panel#token=${KIM}`);
    await page.locator('#panel:not([hidden])').waitFor();
  });

  it('shows her own facts first, then each person with their facts', async () => {
    await fact(page.locator('#facts'), 'Lives in Munich').waitFor();
    assert.equal(await fact(page.locator('#facts'), ANA_FACT).count(), 0, 'never hers');
    assert.deepEqual(await page.locator('#person-list section.person h3').allTextContents(),
      ['Ana (sister)', 'Tom (boss)', 'Leo (brother)', `${MARKUP} (friend)`]);
    for (const [label, text] of [['Ana (sister)', ANA_FACT], ['Tom (boss)', TOM_FACT],
      ['Leo (brother)', LEO_FACT]]) {
      await fact(person(page, label), text).waitFor();
    }
    assert.match(await person(page, `${MARKUP} (friend)`).textContent(),
      /No fact about them is kept now/);
    // Her own list comes first on the page.
    assert.equal(await page.evaluate(() => document.getElementById('facts')
      .compareDocumentPosition(document.getElementById('person-list'))
      & Node.DOCUMENT_POSITION_FOLLOWING), 4);
    await page.screenshot({ path: join(env.MEMFLEET_PANEL_SHOTS, 'panel-persons.png'),
      fullPage: true });
  });

  it('shows a name made of markup as its characters', async () => {
    const heading = person(page, `${MARKUP} (friend)`).locator('h3');
    assert.equal(await heading.textContent(), `${MARKUP} (friend)`);
    assert.equal(await noElementFromMarkup(page), 0);
    assert.deepEqual(watch.dialogs, []);
  });

  it('moves a fact to another person with the keyboard, back to her, then on', async () => {
    const [ana, tom, friend] = [await byName('Ana'), await byName('Tom'), await byName(MARKUP)];
    const tomFact = tom.facts[0];
    // Tab from the skip link to the fact's "Who is it about?", Enter opens the dialog on
    // the choice, a choice, Tab to Move, Enter.
    await page.evaluate(() => document.querySelector('a.skip').focus());
    await tabUntil(page, (a) => a.action === 'move' && a.factId === String(tomFact.id),
      { max: 120 });
    await page.keyboard.press('Enter');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'move-to');
    assert.equal(await page.locator('#move-fact').textContent(), TOM_FACT);
    assert.equal(await page.locator('#move-to').inputValue(), String(tom.id), 'the current one');
    // The markup name is a choice's text, never markup.
    assert.ok((await page.locator('#move-to option').allTextContents()).includes(
      `${MARKUP} (friend)`));
    assert.equal(await noElementFromMarkup(page), 0);
    await page.keyboard.press('ArrowUp'); // You, Ana, Tom, ...: from Tom to Ana
    assert.equal(await page.locator('#move-to').inputValue(), String(ana.id));
    await tabUntil(page, (a) => a.text === 'Move' && a.inDialog, { max: 3 });
    await page.keyboard.press('Enter');
    await status(page, 'Moved: it is a fact about Ana (sister) now');
    assert.deepEqual((await byName('Ana')).facts.map((f) => f.text), [ANA_FACT, TOM_FACT]);
    assert.deepEqual((await byName('Tom')).facts, []);
    await fact(person(page, 'Ana (sister)'), TOM_FACT).waitFor();
    assert.match(await person(page, 'Tom (boss)').textContent(), /No fact about them/);
    const moved = (await byName('Ana')).facts.find((f) => f.text === TOM_FACT);
    assert.deepEqual(await page.evaluate(() => [document.activeElement.dataset.action,
      document.activeElement.dataset.id]), ['move', String(moved.id)], 'focus on the moved fact');

    // Back to her: a fact about her, in her own list (and her reads).
    await fact(person(page, 'Ana (sister)'), TOM_FACT)
      .getByRole('button', { name: 'Who is it about?' }).click();
    await page.locator('#move-to').selectOption({ label: 'You' });
    await page.locator('#move-dialog').getByRole('button', { name: 'Move' }).click();
    await status(page, 'Moved: it is a fact about you now');
    const hers = (await activeFacts(KIM, 'kim')).get(TOM_FACT);
    assert.equal(hers.person_id, null);
    await fact(page.locator('#facts'), TOM_FACT).waitFor();

    // On to the friend named with markup; its section shows it.
    await fact(page.locator('#facts'), TOM_FACT)
      .getByRole('button', { name: 'Who is it about?' }).click();
    await page.locator('#move-to').selectOption({ label: `${MARKUP} (friend)` });
    await page.locator('#move-dialog').getByRole('button', { name: 'Move' }).click();
    await status(page, `Moved: it is a fact about ${MARKUP} (friend) now`);
    assert.equal(await noElementFromMarkup(page), 0);
    await fact(person(page, `${MARKUP} (friend)`), TOM_FACT).waitFor();
    assert.equal((await activeFacts(KIM, 'kim')).has(TOM_FACT), false);
    assert.deepEqual((await chainOf(KIM, 'kim', tomFact.id)).map(
      (v) => [v.text, v.person_id, v.superseded_reason]), [
      [TOM_FACT, tom.id, 'updated'], [TOM_FACT, ana.id, 'updated'], [TOM_FACT, null, 'updated'],
      [TOM_FACT, friend.id, null]]);
  });

  it('renames a person, with their relation and other names', async () => {
    const ana = await byName('Ana');
    const edit = person(page, 'Ana (sister)')
      .getByRole('button', { name: 'Change name or relation' });
    await edit.click();
    assert.equal(await page.locator('#person-name').inputValue(), 'Ana');
    assert.equal(await page.locator('#person-relation').inputValue(), 'sister');
    // Neither a name nor a relation: said in the dialog, nothing sent.
    await page.locator('#person-name').fill('');
    await page.locator('#person-relation').fill(' ');
    await page.locator('#person-dialog').getByRole('button', { name: 'Save' }).click();
    await page.locator('#person-error', { hasText: 'Give a name or who they are to you' })
      .waitFor();
    await page.locator('#person-name').fill('Anna');
    await page.locator('#person-relation').fill('older sister');
    await page.locator('#person-aliases').fill('Annie, Nana ,');
    await page.locator('#person-dialog').getByRole('button', { name: 'Save' }).click();
    await status(page, 'Saved');
    const now = await byName('Anna');
    assert.deepEqual([now.id, now.relation, now.aliases, now.label_set_by],
      [ana.id, 'older sister', ['Annie', 'Nana'], 'user']);
    const section = person(page, 'Anna (older sister)');
    assert.match(await section.locator('.meta').first().textContent(), /^Also called Annie, Nana$/);
    await fact(section, ANA_FACT).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.textContent),
      'Change name or relation');
  });

  it('merges two persons only once confirmed', async () => {
    const [anna, leo] = [await byName('Anna'), await byName('Leo')];
    const merge = person(page, 'Leo (brother)').getByRole('button', { name: 'Merge with…' });
    await merge.click();
    const dialog = page.locator('#merge-dialog[open]');
    assert.match(await dialog.locator('#merge-what').textContent(),
      /Every fact about .?Leo \(brother\).? becomes a fact about the person you choose.*cannot be undone/);
    assert.equal(await page.locator('#merge-confirm').isDisabled(), true, 'until one is chosen');
    assert.deepEqual(await page.locator('#merge-into option').allTextContents(),
      ['Choose a person', 'Anna (older sister)', 'Tom (boss)', `${MARKUP} (friend)`]);
    // Escape: nothing merged, focus back on the button.
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    assert.equal(await merge.evaluate((b) => b === document.activeElement), true);
    assert.equal((await persons()).length, 4);

    // By keyboard: the dialog opens on the choice, a key chooses, Tab, Enter.
    await merge.focus();
    await page.keyboard.press('Enter');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'merge-into');
    await page.keyboard.press('ArrowDown');
    assert.equal(await page.locator('#merge-into').inputValue(), String(anna.id));
    assert.equal(await page.locator('#merge-confirm').isDisabled(), false);
    await tabUntil(page, (a) => a.id === 'merge-confirm', { max: 2 });
    await page.keyboard.press('Enter');
    await status(page, 'Merged into Anna (older sister)');
    const after = await persons();
    assert.deepEqual(after.map((p) => p.display_name), ['Anna', 'Tom', MARKUP]);
    const kept = after.find((p) => p.id === anna.id);
    assert.deepEqual(kept.facts.map((f) => f.text).sort(), [ANA_FACT, LEO_FACT].sort());
    assert.deepEqual(kept.aliases, ['Annie', 'Nana', 'Leo']);
    assert.equal((await persons('?include_merged=true')).find((p) => p.id === leo.id)
      .merged_into, anna.id);
    assert.equal(await person(page, 'Leo (brother)').count(), 0);
    await fact(person(page, 'Anna (older sister)'), LEO_FACT).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.id), `person-name-${anna.id}`);
  });

  it('corrects and pins a fact about a person; one removed meanwhile is added as theirs',
    async () => {
      const anna = await byName('Anna');
      const section = person(page, 'Anna (older sister)');
      await fact(section, ANA_FACT).getByRole('button', { name: 'Correct' }).click();
      await page.locator('#edit-text').fill("The user's sister Anna is vegan");
      await page.locator('#edit-dialog').getByRole('button', { name: 'Save' }).click();
      await status(page, 'Corrected');
      await fact(section, "The user's sister Anna is vegan")
        .getByRole('button', { name: 'Pin' }).click();
      await status(page, 'Pinned');
      const vegan = (await byName('Anna')).facts.find(
        (f) => f.text === "The user's sister Anna is vegan");
      assert.deepEqual([vegan.person_id, vegan.pinned], [anna.id, true]);

      // Removed (here: through the API) while she corrects it: saved as a new fact, and
      // still a fact about Anna, never hers.
      const chess = (await byName('Anna')).facts.find((f) => f.text === LEO_FACT);
      await fact(section, LEO_FACT).getByRole('button', { name: 'Correct' }).click();
      await page.locator('#edit-text').fill("The user's brother Leo plays go");
      assert.equal((await call(KIM, 'DELETE', `/users/kim/facts/${chess.id}`)).status, 200);
      await page.locator('#edit-dialog').getByRole('button', { name: 'Save' }).click();
      await page.locator('#edit-conflict', { hasText: 'removed or ended' }).waitFor();
      await page.getByRole('button', { name: 'Add as a new fact' }).click();
      await status(page, 'Added as a new fact');
      assert.ok((await byName('Anna')).facts.some(
        (f) => f.text === "The user's brother Leo plays go"));
      assert.equal((await activeFacts(KIM, 'kim')).has("The user's brother Leo plays go"), false);
      await fact(section, "The user's brother Leo plays go").waitFor();
    });

  it('a rename on a stale view is refused, shown, and the typed name kept', async () => {
    const [tom, friend] = [await byName('Tom'), await byName(MARKUP)];
    await person(page, 'Tom (boss)').getByRole('button', { name: 'Change name or relation' })
      .click();
    await page.locator('#person-name').fill('Thomas');
    // Meanwhile another tab (here: the API) merges Tom into the friend.
    const behind = await call(KIM, 'POST', `/users/kim/persons/${tom.id}/merge`,
      { into: friend.id });
    assert.equal(behind.status, 200);
    await page.locator('#person-dialog').getByRole('button', { name: 'Save' }).click();
    await page.locator('#person-error', { hasText: 'changed meanwhile' }).waitFor();
    assert.equal(await page.locator('#person-name').inputValue(), 'Thomas');
    assert.equal(await person(page, 'Tom (boss)').count(), 0, 'the page behind is current');
    await page.keyboard.press('Escape');
    assert.equal((await byName('Thomas')), undefined);
  });

  it('names every control, fits a phone, and reads at AA contrast', async () => {
    const { unnamed, described } = await unnamedControls(page);
    assert.deepEqual(unnamed, []);
    assert.ok(described.includes('Change name or relation: Anna (older sister)'),
      described.join(' | '));
    assert.ok(described.includes('Who is it about?: Lives in Munich'), described.join(' | '));
    for (const colorScheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme });
      assert.deepEqual(await lowContrast(page), [], `${colorScheme} scheme`);
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 375, height: 800 });
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 375, `the page is ${width} px wide at a 375 px viewport`);
  });

  it('made no request elsewhere, broke no CSP rule, fired no dialog', async () => {
    assert.equal(await noElementFromMarkup(page), 0);
    await assertClean(page, watch, [409]); // the stale rename and correction above
  });
});
