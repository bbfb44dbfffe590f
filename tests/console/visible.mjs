// Checks which characters toolgate's approval console marks, with Node alone (no browser).
//
// Usage: node visible.mjs PATH/TO/console.js
//
// The page script runs in a `vm` context with just enough of a document to load. Every
// character that this engine's Unicode data classes as a format character (Cf), a control
// (Cc, except tab and newline) or a line or paragraph separator (Zl, Zp) must be one the page
// marks. Prints {"ranges": [[START, END]…], "failures": […]} as JSON: the Rust test compares
// the ranges with toolgate_core::visible::INVISIBLE and fails on any failure.
import vm from 'node:vm';

import { loadPage } from './page.mjs';

const context = loadPage(process.argv[2]);
const isInvisible = vm.runInContext('isInvisible', context);
const ranges = vm.runInContext('INVISIBLE', context).map(([start, end]) => [start, end]);

const mustMark = /^[\p{Cf}\p{Cc}\p{Zl}\p{Zp}]$/u;
const failures = [];
let classified = 0;
for (let code = 0; code <= 0x10ffff; code += 1) {
  if (code >= 0xd800 && code <= 0xdfff) continue;
  const ch = String.fromCodePoint(code);
  if (ch === '\t' || ch === '\n') {
    if (isInvisible(code)) failures.push(`U+${code.toString(16)} is marked but is layout`);
    continue;
  }
  if (mustMark.test(ch)) {
    classified += 1;
    if (!isInvisible(code)) failures.push(`U+${code.toString(16).toUpperCase().padStart(4, '0')} is not marked`);
  }
}
console.log(JSON.stringify({ ranges, classified, unicode: process.versions.unicode, failures }));
