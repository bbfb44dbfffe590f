// Chromium as the person, for the console checks that need a real browser (approve.mjs,
// glance.mjs and project.mjs), and what they read of the page alike. Each is run as
// `node SCRIPT.mjs PLAN.json`, the plan naming where playwright-core's node_modules are and,
// optionally, which Chromium to launch.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

// The plan named on the command line, and a headless Chromium launched as it says.
export async function launch() {
  const plan = JSON.parse(readFileSync(process.argv[2], 'utf8'));
  const require = createRequire(plan.node_modules + '/');
  const { chromium } = require('playwright-core');
  const browser = await chromium.launch({
    executablePath: plan.chromium || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  return { plan, browser };
}

// The outcomes list once it holds at least `count` rows: each row's cells' texts.
export async function outcomes(page, count) {
  await page.waitForFunction(
    (n) => document.querySelectorAll('#outcomes tbody tr').length >= n,
    count, { timeout: 10000 },
  );
  return page.locator('#outcomes tbody tr').evaluateAll(
    (rows) => rows.map((r) => Array.from(r.cells).map((c) => c.textContent)),
  );
}
