// Looks at the console's project panel in Chromium as a person would, and trusts the files it
// shows with its button.
//
// Usage: node project.mjs PLAN.json
//
// PLAN is {"url": LOGIN_LINK, "screenshots": DIR, "node_modules": DIR, "chromium": PATH,
// "change": {"path": FILE, "text": TEXT}, "swaps": [{"path": FILE, "text": TEXT, "status":
// STATUS}]}. The report, printed as JSON, holds what the panel showed before and after the
// button was clicked, after FILE was then written with TEXT and the panel read again, and
// after each swap was written and the panel's own poll showed it with STATUS (`swapped`)
// (status, status line, files, items, whether the button is offered,
// the note, the diff's lines and their kinds, how many elements other than the page's own the
// panel holds), and every console error. A screenshot of each is saved as
// `project-STATUS.png`. The
// assertions live in the Rust test that runs this (crates/toolgate/tests/console_project.rs).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { launch } from './browser.mjs';

const { plan, browser } = await launch();
const report = { console_errors: [] };

async function panel(page) {
  return page.evaluate(() => {
    const items = (title) => Array.from(document.querySelectorAll('#project .project-items'))
      .filter((box) => box.querySelector('h3').textContent.startsWith(title))
      .flatMap((box) => Array.from(box.querySelectorAll('li'), (li) => li.textContent));
    const status = document.getElementById('project-status');
    const button = document.getElementById('project-trust');
    return {
      status: status.dataset.status,
      status_text: status.textContent,
      files: Array.from(document.querySelectorAll('#project .project-files li'), (li) => li.textContent),
      applied: items('Applies now'),
      pending: items('Pending until trusted'),
      trust_button: !button.hidden && !button.disabled,
      note: document.getElementById('project-note').textContent,
      message: document.getElementById('project-message').textContent,
      diff: Array.from(document.querySelectorAll('#project pre.diff > span'), (s) => [s.className, s.textContent]),
      // Markup in a file's name or text is shown, never made into elements.
      foreign_elements: document.querySelectorAll('#project img, #project script, #project b').length,
    };
  });
}

try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.on('console', (message) => {
    if (message.type() === 'error') report.console_errors.push(message.text());
  });
  page.on('pageerror', (error) => report.console_errors.push(String(error)));
  await page.goto(plan.url);
  await page.waitForSelector('#project-status[data-status]', { timeout: 10000 });
  report.before = await panel(page);
  await page.screenshot({ path: join(plan.screenshots, `project-${report.before.status}.png`), fullPage: true });
  await page.locator('#project-trust').click();
  await page.waitForSelector('#project-status[data-status="trusted"]', { timeout: 10000 });
  report.after = await panel(page);
  await page.screenshot({ path: join(plan.screenshots, 'project-trusted.png'), fullPage: true });
  writeFileSync(plan.change.path, plan.change.text);
  await page.locator('#project-reload').click();
  await page.waitForSelector('#project-status[data-status="changed"]', { timeout: 10000 });
  report.changed = await panel(page);
  await page.screenshot({ path: join(plan.screenshots, 'project-changed.png'), fullPage: true });
  // Another process swaps the files while they are shown: unreadable first, then readable
  // again with other text, each found by the panel's own poll, without Read.
  report.swapped = [];
  for (const swap of plan.swaps || []) {
    const shown = await page.evaluate(() => document.getElementById('project-body').textContent);
    writeFileSync(swap.path, swap.text);
    await page.waitForFunction(
      ([before, status]) => document.getElementById('project-body').textContent !== before
        && document.getElementById('project-status').dataset.status === status,
      [shown, swap.status],
      { timeout: 20000 },
    );
    report.swapped.push(await panel(page));
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
