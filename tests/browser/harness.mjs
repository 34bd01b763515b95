// What the panel's browser test shares: Debian's chromium through playwright-core, a
// watch on everything a page does (requests, console, dialogs, CSP violations), and
// the memory API over HTTP as the test checks it (not through the page).
import assert from 'node:assert/strict';
import { env } from 'node:process';
import { chromium } from 'playwright-core';

export const API = env.MEMFLEET_PANEL_URL;
export const ORIGIN = new URL(API).origin;

export function launch() {
  return chromium.launch({ executablePath: '/usr/bin/chromium' });
}

/** A fresh context (no cache, no storage) and page, watched. */
export async function openPage(browser, { width = 1100, height = 900 } = {}) {
  const context = await browser.newContext({ viewport: { width, height }, acceptDownloads: true });
  const page = await context.newPage();
  const watch = { requests: [], console: [], dialogs: [], errors: [] };
  page.on('request', (r) => watch.requests.push(r.url()));
  page.on('console', (m) => watch.console.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => watch.errors.push(String(e)));
  page.on('dialog', (d) => { watch.dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  // Runs before the page's own scripts, outside its CSP: every violation is kept.
  await page.addInitScript(() => {
    window.cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  return { context, page, watch };
}

/** The page's and the browser's own records: no CSP violation, no console error (but
 * the refusals the test provoked: `expected` statuses), no request to another origin,
 * no script error, no dialog. */
export async function assertClean(page, watch, expected = []) {
  assert.deepEqual(await page.evaluate(() => window.cspViolations), []);
  const provoked = new RegExp(`^error: Failed to load resource: the server responded with a `
    + `status of (${expected.join('|') || 'none'}) `);
  assert.deepEqual(watch.console.filter((m) => /Content Security Policy|^error/i.test(m)
    && !provoked.test(m)), []);
  assert.deepEqual(watch.errors, []);
  assert.deepEqual(watch.dialogs, []);
  const elsewhere = watch.requests.filter((u) => new URL(u).origin !== ORIGIN);
  assert.deepEqual(elsewhere, [], 'no request leaves the API origin');
}

export async function call(token, method, path, body) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const resp = await fetch(API + path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  return { status: resp.status, body: text ? JSON.parse(text) : null };
}

/** The user's active facts by text, read through the API. */
export async function activeFacts(token, user) {
  const { status, body } = await call(token, 'GET', `/users/${user}/facts`);
  assert.equal(status, 200);
  return new Map(body.groups.flatMap((g) => g.facts).map((f) => [f.text, f]));
}

export async function chainOf(token, user, id) {
  const { status, body } = await call(token, 'GET', `/users/${user}/facts/${id}/chain`);
  assert.equal(status, 200);
  return body.versions;
}

/** From the accessibility tree the browser itself computed: the roles of the
 * buttons, links and form fields that have no accessible name (there should be
 * none), and "name: description" of each button that has a description. */
export async function unnamedControls(page) {
  const cdp = await page.context().newCDPSession(page);
  const { nodes } = await cdp.send('Accessibility.getFullAXTree');
  const controls = new Set(['button', 'textbox', 'searchbox', 'combobox', 'checkbox',
    'switch', 'link']);
  const shown = nodes.filter((n) => !n.ignored && controls.has(n.role?.value));
  await cdp.detach();
  return {
    unnamed: shown.filter((n) => !(n.name?.value || '').trim()).map((n) => n.role.value),
    described: shown.filter((n) => n.role.value === 'button' && n.description?.value)
      .map((n) => `${n.name.value}: ${n.description.value}`),
  };
}

/** Tab (or shift-Tab) until `done(activeElementInfo)` holds; the keys pressed. */
export async function tabUntil(page, done, { max = 80, back = false } = {}) {
  for (let presses = 1; presses <= max; presses += 1) {
    await page.keyboard.press(back ? 'Shift+Tab' : 'Tab');
    const info = await page.evaluate(() => {
      const a = document.activeElement;
      return {
        tag: a?.tagName, id: a?.id, text: a?.textContent?.trim(), action: a?.dataset?.action,
        factId: a?.dataset?.id, inDialog: Boolean(a?.closest('dialog')),
        outline: a ? getComputedStyle(a).outlineStyle : '',
      };
    });
    if (done(info)) return { presses, info };
  }
  throw new Error('the keyboard never reached the control');
}

/** Every visible piece of text whose contrast with what is behind it is below WCAG 2's
 * AA level (4.5:1; 3:1 for large text: 24 px, or 18.66 px bold), as
 * "ratio 'text' (colour on background)". The background is the nearest ancestor's
 * that is not transparent, with translucent ones blended over it; disabled controls
 * are exempt (WCAG's own exception), and so is text under a background image. */
export async function lowContrast(page) {
  return page.evaluate(() => {
    const rgba = (value) => {
      const m = value.match(/rgba?\(([\d.]+),? ([\d.]+),? ([\d.]+)(?:,? \/? ?([\d.]+))?\)/);
      if (!m) throw new Error(`unread colour ${value}`);
      return [Number(m[1]), Number(m[2]), Number(m[3]), m[4] === undefined ? 1 : Number(m[4])];
    };
    const over = (top, bottom) => top.slice(0, 3).map((c, i) => c * top[3]
      + bottom[i] * (1 - top[3])).concat(1);
    const luminance = ([r, g, b]) => {
      const lin = (c) => { const s = c / 255; return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4; };
      return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
    };
    const background = (el) => {
      const layers = [];
      for (let e = el; e; e = e.parentElement) {
        const colour = rgba(getComputedStyle(e).backgroundColor);
        if (colour[3] > 0) layers.push(colour);
        if (colour[3] === 1) break;
      }
      let result = [255, 255, 255, 1]; // the canvas behind everything
      for (const layer of layers.reverse()) result = over(layer, result);
      return result;
    };
    const failures = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent.trim();
      const el = node.parentElement;
      if (!text || !el || !el.checkVisibility({ opacityProperty: true, visibilityProperty: true })) continue;
      if (el.closest('button:disabled, input:disabled')) continue;
      const style = getComputedStyle(el);
      const bg = background(el);
      const fg = over(rgba(style.color), bg);
      const [l1, l2] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
      const ratio = (l1 + 0.05) / (l2 + 0.05);
      const size = parseFloat(style.fontSize);
      const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
      if (ratio < (large ? 3 : 4.5)) {
        failures.push(`${ratio.toFixed(2)} '${text.slice(0, 30)}' (${style.color} on rgb(${bg.slice(0, 3).map(Math.round).join(', ')}))`);
      }
    }
    return failures;
  });
}
