// Checks how toolgate's approval console colours diff lines, with Node alone (no browser).
//
// Usage: node diff.mjs PATH/TO/console.js
//
// The page script runs in a `vm` context with just enough of a document to load; its
// `diffKinds` is then given diffs whose added and removed lines imitate file headers. Prints
// the failures and exits 1 when any line is coloured wrongly.
import vm from 'node:vm';

import { loadPage } from './page.mjs';

const context = loadPage(process.argv[2]);

const cases = [
  {
    name: 'an added line that looks like a file header is an addition',
    diff: '--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,3 @@\n keep\n-old\n+++ b/other.txt\n+new',
    kinds: ['meta', 'meta', 'hunk', '', 'del', 'add', 'add'],
  },
  {
    name: 'a removed line that looks like a file header is a removal',
    diff: '--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n--- a/other.txt\n+b',
    kinds: ['meta', 'meta', 'hunk', 'del', 'add'],
  },
  {
    name: 'headers after a hunk ends begin the next file',
    diff: '--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n--- a/c.txt\n+++ b/c.txt\n@@ -0,0 +1 @@\n+c',
    kinds: ['meta', 'meta', 'hunk', 'del', 'add', 'meta', 'meta', 'hunk', 'add'],
  },
  {
    name: 'a no-newline marker does not end the hunk early',
    diff: '@@ -1,2 +1,2 @@\n-a\n\\ No newline at end of file\n+++b\n x',
    kinds: ['hunk', 'del', '', 'add', ''],
  },
];

const failures = [];
for (const { name, diff, kinds } of cases) {
  const seen = vm.runInContext('diffKinds', context)(diff).map(([, kind]) => kind);
  if (JSON.stringify(seen) !== JSON.stringify(kinds)) {
    failures.push(`${name}: expected ${JSON.stringify(kinds)}, saw ${JSON.stringify(seen)}`);
  }
}
if (failures.length) {
  console.log(failures.join('\n'));
  process.exit(1);
}
console.log(`${cases.length} diffs coloured as expected`);
