// Checks what a request's card shows without a click, with Node alone (no browser).
//
// Usage: node card.mjs PATH/TO/console.js
//
// The page script runs in a `vm` context with a small recording document; its `card` is given
// requests of each kind, and the report says, for each, whether the preview is a block of the
// card itself and whether the arguments are open. Prints {"cards": {NAME: {…}}} as JSON; the
// Rust test (crates/toolgate/tests/console.rs) holds the expectations.
import { readFileSync } from 'node:fs';
import vm from 'node:vm';

function element(tag) {
  return {
    tagName: tag.toUpperCase(),
    children: [],
    dataset: {},
    className: '',
    textContent: '',
    open: false,
    appendChild(child) { this.children.push(child); if (child.textContent) this.textContent += child.textContent; return child; },
    replaceChildren() { this.children = []; this.textContent = ''; },
    addEventListener() {},
    setAttribute() {},
    querySelectorAll() { return []; },
  };
}

const context = vm.createContext({
  document: {
    querySelector: () => ({ content: 'csrf' }),
    getElementById: () => element('div'),
    createElement: element,
    createTextNode: (text) => ({ textContent: text }),
  },
  fetch: () => Promise.reject(new Error('no server here')),
  setInterval: () => 0,
});
vm.runInContext(readFileSync(process.argv[2], 'utf8'), context);
const card = vm.runInContext('card', context);

const base = {
  id: 'r1', tool: 't', version: '1', effect: 'irreversible', surface: 'mcp', actor: 'a',
  workspace: '0123456789abcdef', workspace_root: '/ws', policies: [], approval_mode: 'each_call',
  arguments: { command: 'curl x | sh' }, resources: [], choices: ['allow_once', 'reject'],
};
const requests = {
  command_with_preview: { ...base, preview_kind: 'command', preview: 'program: /bin/sh\nstdin, 3 bytes in 1 line\n  | id' },
  command_without_preview: { ...base, preview_kind: 'command', preview: null },
  text: { ...base, effect: 'read_only', preview_kind: 'text', preview: 'x' },
  diff: { ...base, effect: 'local_write', preview_kind: 'diff', preview: '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b' },
  flagged: { ...base, preview_kind: 'text', preview: null, descriptor_flags: [
    { rule: 'instruction-tag', kind: 'instruction', at: '/description', excerpt: '<IMPORTANT>\u200b', explanation: 'markup aimed at the model' },
  ] },
  hook_ask: { ...base, effect: 'read_only', preview_kind: 'text', preview: null,
    hook_asks: [{ name: 'guard', reason: 'a.txt is under review\u202e' }],
    hook_ask_sentences: ['The hook `guard` asked for your approval of this call: a.txt is under review\u202e'] },
};
const cards = {};
for (const [name, request] of Object.entries(requests)) {
  const { root } = card(request);
  const top = root.children;
  const preview = top.find((c) => c.tagName === 'PRE');
  const details = top.find((c) => c.tagName === 'DETAILS');
  const flags = top.find((c) => c.className === 'descriptor-flags');
  cards[name] = {
    preview_in_body: preview !== undefined,
    preview_text: preview ? preview.textContent : null,
    arguments_open: details ? details.open : null,
    flags_text: flags ? flags.textContent : null,
    first: { class: top[0].className, text: top[0].textContent },
  };
}
console.log(JSON.stringify({ cards }));
