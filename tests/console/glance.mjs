// Looks at the console's cards in Chromium as a person would at a glance, at each width given.
//
// Usage: node glance.mjs PLAN.json
//
// PLAN is {"url": LOGIN_LINK, "screenshots": DIR, "widths": [1280, 800], "steps": [STEP…]}.
// Each STEP waits for the pending request of `tool`; at each width the page is resized, a
// screenshot of it saved as `glance-NN-TOOL-WIDTH.png`, and what overflows measured; then the
// request is answered with `choice`. The report, printed as JSON, holds for each step the
// card's first line and, per width, the document's and the widest elements' sizes; and, for
// the whole run, every console error, failed request and answer of status 400 or more. The
// assertions live in the Rust test that runs this (crates/toolgate/tests/console.rs).
import { join } from 'node:path';
import { launch, outcomes } from './browser.mjs';

const { plan, browser } = await launch();
const report = { console_errors: [], failed_requests: [], error_answers: [], steps: [] };
try {
  const context = await browser.newContext({ viewport: { width: plan.widths[0], height: 900 } });
  const page = await context.newPage();
  page.on('console', (message) => {
    if (message.type() === 'error') report.console_errors.push(message.text());
  });
  page.on('pageerror', (error) => report.console_errors.push(String(error)));
  page.on('requestfailed', (request) => {
    report.failed_requests.push(request.url() + ': ' + (request.failure() || {}).errorText);
  });
  page.on('response', (response) => {
    if (response.status() >= 400) report.error_answers.push(response.status() + ' ' + response.url());
  });
  await page.goto(plan.url);
  await page.waitForSelector('#status:has-text("connected")', { timeout: 10000 });

  for (const [i, step] of plan.steps.entries()) {
    const card = page.locator(`article.request[data-tool="${step.tool}"]`).first();
    await card.waitFor({ state: 'visible', timeout: 20000 });
    await card.locator('details.arguments').evaluate((d) => { d.open = true; });
    const seen = {
      tool: step.tool,
      // The card's first rendered line, and the element it is in.
      first_line: await card.evaluate((c) => c.innerText.split('\n')[0]),
      first_child: await card.evaluate((c) => c.firstElementChild.className),
      summary: await card.locator('p.summary').textContent(),
      client: await card.locator('dd[data-field="client"]').textContent({ timeout: 1000 }).catch(() => null),
      widths: {},
    };
    for (const width of plan.widths) {
      await page.setViewportSize({ width, height: 900 });
      await page.waitForTimeout(100);
      seen.widths[width] = await page.evaluate(() => {
        const root = document.documentElement;
        const viewport = root.clientWidth;
        // Every element whose box reaches past the viewport's right edge, and every element
        // whose content is wider than its box without a scroll bar of its own to reach it.
        const wider = [];
        for (const node of document.querySelectorAll('body *')) {
          const box = node.getBoundingClientRect();
          const style = getComputedStyle(node);
          const scrolls = ['auto', 'scroll'].includes(style.overflowX);
          if (box.right > viewport + 0.5
            || (!scrolls && node.scrollWidth > node.clientWidth + 1 && node.clientWidth > 0)) {
            wider.push({
              tag: node.tagName.toLowerCase(), class: node.className,
              right: Math.round(box.right), scroll_width: node.scrollWidth, client_width: node.clientWidth,
              text: (node.textContent || '').slice(0, 80),
            });
          }
        }
        // Every block's lines wrap (a diff's, a command's, the arguments'): none is scrolled
        // out of sight.
        const clipped = Array.from(document.querySelectorAll('article.request pre'))
          .filter((pre) => pre.scrollWidth > pre.clientWidth + 1).length;
        return {
          viewport, scroll_width: root.scrollWidth, body_scroll_width: document.body.scrollWidth,
          wider: wider.slice(0, 10), clipped_previews: clipped,
        };
      });
      await page.screenshot({
        path: join(plan.screenshots, `glance-${String(i + 1).padStart(2, '0')}-${step.tool}-${width}.png`),
        fullPage: true,
      });
    }
    await page.setViewportSize({ width: plan.widths[0], height: 900 });
    await card.locator(`button[data-choice="${step.choice}"]`).click();
    await card.waitFor({ state: 'detached', timeout: 10000 });
    report.steps.push(seen);
  }
  report.outcomes = await outcomes(page, plan.steps.length);
  for (const width of plan.widths) {
    await page.setViewportSize({ width, height: 900 });
    await page.screenshot({ path: join(plan.screenshots, `glance-outcomes-${width}.png`), fullPage: true });
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
