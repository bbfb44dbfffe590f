// Drives toolgate's approval console in Chromium with playwright-core.
//
// Usage: node approve.mjs PLAN.json
//
// PLAN is {"url": "http://127.0.0.1:PORT/login?code=…", "screenshots": DIR, "steps": [STEP…]},
// with an optional "prefix" for the screenshots' names and "foreign": false to skip the
// foreign page's attempt. Each STEP waits for the pending request of `tool`, records what the
// page shows of it (opening its arguments first if `open_arguments`), saves a screenshot, and
// then answers it with `choice` (`allow_once`, `allow_workspace`, `reject`), typing `reason`
// first if given. The report, printed as JSON, holds what was seen; the assertions live in
// the Rust test that runs this (crates/toolgate/tests/console.rs).
import { join } from 'node:path';
import { launch, outcomes } from './browser.mjs';

const { plan, browser } = await launch();
const report = { dialogs: [], console_errors: [], steps: [] };
try {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  // A model-written string that ran as script would open a dialog or log here.
  page.on('dialog', async (dialog) => {
    report.dialogs.push(dialog.message());
    await dialog.dismiss();
  });
  page.on('console', (message) => {
    if (message.type() === 'error') report.console_errors.push(message.text());
  });
  // Without the cookie, or with a login code the console never issued, it shows nothing.
  const stranger = await browser.newContext();
  const strangerPage = await stranger.newPage();
  const origin = new URL(plan.url).origin;
  report.no_token_status = (await strangerPage.goto(origin + '/')).status();
  report.wrong_token_status = (await strangerPage.goto(origin + '/login?code=' + '0'.repeat(64))).status();
  report.stranger_text = await strangerPage.textContent('body');
  await stranger.close();

  await page.goto(plan.url);
  report.address_after_open = page.url();
  const cookies = await context.cookies();
  report.cookies = cookies.map((c) => ({ name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite, path: c.path }));
  await page.waitForSelector('#status:has-text("connected")', { timeout: 10000 });

  for (const [i, step] of plan.steps.entries()) {
    const card = page.locator(`article.request[data-tool="${step.tool}"]`).first();
    await card.waitFor({ state: 'visible', timeout: 20000 });
    if (step.open_arguments) await card.locator('details.arguments').evaluate((d) => { d.open = true; });
    // The card is built whole before it shows, so a part it lacks is absent, not late: looked
    // for briefly rather than for playwright's default 30 s.
    const absent = { timeout: 1000 };
    const seen = {
      tool: step.tool,
      heading: await card.locator('h3').textContent(),
      fields: {},
      choices: await card.locator('button[data-choice]').evaluateAll((bs) => bs.map((b) => b.dataset.choice)),
      preview_kind: await card.locator('pre[data-kind]').getAttribute('data-kind', absent).catch(() => null),
      preview_text: await card.locator('pre[data-kind]').textContent(absent).catch(() => null),
      added_lines: await card.locator('pre.diff span.add').allTextContents(),
      removed_lines: await card.locator('pre.diff span.del').allTextContents(),
      added_colour: await card.locator('pre.diff span.add').first()
        .evaluate((e) => getComputedStyle(e).color, null, absent).catch(() => null),
      scope: await card.locator('p.scope').textContent(absent).catch(() => null),
      // The text of every line of the diff, and each line's colour class.
      diff_lines: await card.locator('pre.diff > span').evaluateAll(
        (lines) => lines.map((l) => [l.className, l.textContent]),
      ),
      arguments_text: await card.locator('details.arguments pre').textContent(),
      // Whether the preview is read without a click: shown, outside any closed `details`,
      // nothing of it cut off or scrolled out of sight, and its innerText (what is rendered).
      preview_shown: await card.locator('pre[data-kind]').evaluate((pre) => {
        const closed = pre.closest('details:not([open])');
        const box = pre.getBoundingClientRect();
        return {
          visible: box.width > 0 && box.height > 0 && closed === null,
          clipped: pre.scrollWidth > pre.clientWidth + 1 || pre.scrollHeight > pre.clientHeight + 1,
          rendered: pre.innerText,
        };
      }, null, absent).catch(() => null),
      card_text: await card.textContent(),
      // Each invisible character's mark: where it is, what it reads, how it looks.
      marks: await card.locator('.invisible').evaluateAll((marks) => marks.map((m) => ({
        in: m.closest('pre.diff') ? 'diff' : m.closest('details.arguments') ? 'arguments'
          : m.closest('pre[data-kind]') ? 'preview' : m.closest('dd') ? 'field' : 'other',
        text: m.textContent,
        code_point: m.dataset.codePoint,
        tag: m.tagName.toLowerCase(),
        background: getComputedStyle(m).backgroundColor,
        display: getComputedStyle(m).display,
        width: m.getBoundingClientRect().width,
      }))),
      // Elements a model could have smuggled in: none may exist inside the card.
      injected_elements: await card.locator('script, img, iframe, [onerror], [onclick]').count(),
    };
    for (const dd of await card.locator('dd[data-field]').all()) {
      seen.fields[await dd.getAttribute('data-field')] = await dd.textContent();
    }
    await page.screenshot({ path: join(plan.screenshots, `${plan.prefix || ''}${String(i + 1).padStart(2, '0')}-${step.tool}-pending.png`), fullPage: true });
    if (i === 0 && plan.foreign !== false) {
      // A page of another origin, open in the person's own browser session, tries to read
      // the pending list and to approve this very request.
      const id = await card.getAttribute('data-id');
      const evil = await context.newPage();
      await evil.route('http://evil.example/**', (route) => route.fulfill({
        contentType: 'text/html', body: '<html><body>an unrelated site</body></html>',
      }));
      await evil.goto('http://evil.example/');
      report.foreign_page = await evil.evaluate(async ([base, id]) => {
        const read = await fetch(base + '/api/pending', { credentials: 'include' })
          .then((r) => 'read ' + r.status, () => 'blocked');
        const decide = await fetch(base + '/api/pending/' + id + '/decision', {
          method: 'POST', mode: 'no-cors', credentials: 'include',
          body: '{"decision":"allow_once"}',
        }).then(() => 'sent', () => 'blocked');
        return { read, decide };
      }, [new URL(plan.url).origin, id]);
      await evil.close();
      await page.waitForTimeout(1500);
      report.foreign_page.still_pending = await card.isVisible();
    }
    if (step.reason !== undefined) {
      await card.locator('input[name="reason"]').fill(step.reason);
    }
    await card.locator(`button[data-choice="${step.choice}"]`).click();
    await card.waitFor({ state: 'detached', timeout: 10000 });
    report.steps.push(seen);
  }
  // Let the outcomes of the last decisions reach the list, then keep a picture of it.
  report.outcomes = await outcomes(page, plan.steps.length);
  report.grants = await page.locator('#grants li').allTextContents();
  await page.screenshot({ path: join(plan.screenshots, `${plan.prefix || ''}outcomes.png`), fullPage: true });
  report.csp = await page.evaluate(async () => (await fetch('/api/pending')).headers.get('content-security-policy'));
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
