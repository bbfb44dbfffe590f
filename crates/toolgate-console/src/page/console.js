// toolgate approval console. Every string shown here may have been written by a model, so
// text reaches the page only through text nodes and `textContent`; nothing is parsed as HTML.
'use strict';

const CSRF = document.querySelector('meta[name="toolgate-csrf"]').content;
const POLL_MS = 1000;
const cards = new Map();

// Characters a person cannot see, or that reorder what is around them (U+202E makes
// `admin = false` read otherwise): shown as a highlighted `<U+XXXX>` mark, never as
// themselves. The same sorted, inclusive ranges as `toolgate_core::visible::INVISIBLE`, which
// the terminal prompt and the elicitation form use; crates/toolgate/tests/console.rs checks
// that the two lists agree and that every Cf, Cc, Zl and Zp character is in them.
const INVISIBLE = [
  [0x0000, 0x0008], // C0 controls before tab
  [0x000B, 0x001F], // C0 controls after newline, carriage return and escape among them
  [0x007F, 0x009F], // delete and the C1 controls
  [0x00AD, 0x00AD], // soft hyphen
  [0x034F, 0x034F], // combining grapheme joiner
  [0x0600, 0x0605], // Arabic number signs
  [0x061C, 0x061C], // Arabic letter mark
  [0x06DD, 0x06DD], // Arabic end of ayah
  [0x070F, 0x070F], // Syriac abbreviation mark
  [0x0890, 0x0891], // Arabic pound and piastre marks above
  [0x08E2, 0x08E2], // Arabic disputed end of ayah
  [0x115F, 0x1160], // Hangul fillers
  [0x17B4, 0x17B5], // Khmer inherent vowels
  [0x180B, 0x180F], // Mongolian variation selectors and vowel separator
  [0x200B, 0x200F], // zero-width space, non-joiner, joiner; left-to-right, right-to-left marks
  [0x2028, 0x202E], // line and paragraph separators; bidirectional embeddings and overrides
  [0x2060, 0x206F], // word joiner, invisible operators, bidirectional isolates, deprecated
  [0x3164, 0x3164], // Hangul filler
  [0xFE00, 0xFE0F], // variation selectors
  [0xFEFF, 0xFEFF], // zero-width no-break space (byte order mark)
  [0xFFA0, 0xFFA0], // halfwidth Hangul filler
  [0xFFF9, 0xFFFB], // interlinear annotation
  [0x110BD, 0x110BD], // Kaithi number sign
  [0x110CD, 0x110CD], // Kaithi number sign above
  [0x13430, 0x1343F], // Egyptian hieroglyph format controls
  [0x1BCA0, 0x1BCA3], // shorthand format controls
  [0x1D173, 0x1D17A], // musical symbol format controls
  [0xE0000, 0xE007F], // tag characters
  [0xE0100, 0xE01EF], // variation selectors supplement
];

function isInvisible(code) {
  // A lone surrogate, which no string from toolgate holds, would show as a replacement mark.
  if (code >= 0xd800 && code <= 0xdfff) return true;
  for (const [start, end] of INVISIBLE) {
    if (code < start) return false;
    if (code <= end) return true;
  }
  return false;
}

function markOf(code) {
  return '<U+' + code.toString(16).toUpperCase().padStart(4, '0') + '>';
}

// Appends `text` to `node` as text nodes, each invisible character as a mark element of
// class `invisible` in its place. The only way text reaches the page.
function appendVisible(node, text) {
  let run = '';
  for (const ch of String(text)) {
    const code = ch.codePointAt(0);
    if (!isInvisible(code)) {
      run += ch;
      continue;
    }
    if (run) node.appendChild(document.createTextNode(run));
    run = '';
    const mark = document.createElement('span');
    mark.className = 'invisible';
    mark.dataset.codePoint = code.toString(16).toUpperCase().padStart(4, '0');
    mark.title = 'an invisible or direction-changing character, shown here instead of itself';
    mark.textContent = markOf(code);
    node.appendChild(mark);
  }
  if (run) node.appendChild(document.createTextNode(run));
  return node;
}

function setText(node, text) {
  node.replaceChildren();
  appendVisible(node, text);
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) appendVisible(node, text);
  return node;
}

function setStatus(text, isError) {
  const status = document.getElementById('status');
  setText(status, text);
  status.className = isError ? 'status error' : 'status';
}

async function getJson(path) {
  const response = await fetch(path, { credentials: 'same-origin', cache: 'no-store' });
  if (!response.ok) throw new Error(path + ': ' + response.status + ' ' + (await response.text()));
  return response.json();
}

async function post(path, body) {
  const response = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json', 'x-toolgate-csrf': CSRF },
    body: JSON.stringify(body || {}),
  });
  if (!response.ok) throw new Error((await response.text()).trim() || String(response.status));
}

// How to colour each line of a unified diff: `meta`, `hunk`, `add`, `del` or ''. Each hunk's
// body is counted from its `@@ -a,b +c,d @@` header, so a line inside it is always an added,
// removed or unchanged line: an added line that reads `++ b/other.txt` shows as an addition,
// never as the `+++` header of another file. `---` and `+++` are headers only between hunks.
function diffKinds(text) {
  let oldLeft = 0;
  let newLeft = 0;
  return text.split('\n').map((line) => {
    if (oldLeft > 0 || newLeft > 0) {
      if (line.startsWith('\\')) return [line, ''];
      if (line.startsWith('+')) { newLeft -= 1; return [line, 'add']; }
      if (line.startsWith('-')) { oldLeft -= 1; return [line, 'del']; }
      oldLeft -= 1;
      newLeft -= 1;
      return [line, ''];
    }
    const hunk = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@/.exec(line);
    if (hunk) {
      oldLeft = hunk[1] === undefined ? 1 : Number(hunk[1]);
      newLeft = hunk[2] === undefined ? 1 : Number(hunk[2]);
      return [line, 'hunk'];
    }
    if (line.startsWith('+++') || line.startsWith('---')) return [line, 'meta'];
    return [line, ''];
  });
}

function diffBlock(text) {
  const pre = el('pre', 'diff');
  pre.dataset.kind = 'diff';
  for (const [line, kind] of diffKinds(text)) pre.appendChild(el('span', kind, line));
  return pre;
}

function field(dl, name, value) {
  dl.appendChild(el('dt', null, name));
  const dd = el('dd', null, value);
  dd.dataset.field = name;
  dl.appendChild(dd);
}

// The longest a name or command is quoted in a card's sentence; the details below show it whole.
const MAX_QUOTED = 80;

function quoted(text) {
  const chars = Array.from(String(text));
  return '`' + (chars.length > MAX_QUOTED ? chars.slice(0, MAX_QUOTED - 1).join('') + '…' : chars.join('')) + '`';
}

function plural(n, one, many) {
  return n + ' ' + (n === 1 ? one : many);
}

// `a`, `a and b`, `a, b and c`.
function listed(items) {
  if (items.length <= 1) return items.join('');
  return items.slice(0, -1).join(', ') + ' and ' + items[items.length - 1];
}

// The one plain sentence a card starts with: what will happen if the person allows the call,
// made from the request's own data (tool, effect, resources, preview) and nothing else: which
// file changes how, or which program runs where, in what sandbox and with what network. The
// details below it are the authority; the sentence only reads them out.
function summary(request) {
  const byKind = {};
  for (const resource of request.resources || []) {
    const at = resource.indexOf(':');
    if (at < 0) continue;
    const kind = resource.slice(0, at);
    (byKind[kind] = byKind[kind] || []).push(resource.slice(at + 1));
  }
  const tool = request.tool;
  if (byKind.program) {
    let command = byKind.program[0];
    if (byKind.argv) {
      try {
        const argv = JSON.parse(byKind.argv[0]);
        if (Array.isArray(argv)) command = argv.join(' ');
      } catch (e) { /* shown as the program alone */ }
    } else if (Array.isArray(request.arguments && request.arguments.argv)) {
      command = [command].concat(request.arguments.argv.slice(1).map(String)).join(' ');
    }
    let text = tool + ' will run ' + quoted(command);
    const cwd = (byKind.cwd || [])[0];
    text += cwd && cwd !== '.' ? ' in ' + quoted(cwd + '/') : ' in the workspace';
    const sandbox = (byKind.sandbox || [])[0];
    if (sandbox === 'none') text += ', NOT sandboxed';
    else if (sandbox) text += ', sandboxed';
    const network = byKind.network || [];
    if (network.includes('unconfined')) text += ', with UNRESTRICTED network';
    else if (network.length === 0 || (network.length === 1 && network[0] === 'none')) {
      if (sandbox) text += ', with no network';
    } else text += ', with network to ' + listed(network.filter((h) => h !== 'none'));
    return text + '.';
  }
  if (request.preview_kind === 'diff') {
    let added = 0;
    let removed = 0;
    for (const [, kind] of diffKinds(request.preview || '')) {
      if (kind === 'add') added += 1;
      if (kind === 'del') removed += 1;
    }
    const created = byKind.create || [];
    const changed = (byKind.path || []).filter((p) => !created.includes(p));
    const parts = [];
    if (created.length) parts.push('create ' + listed(created.map(quoted)));
    if (changed.length) parts.push('change ' + listed(changed.map(quoted)));
    if (!parts.length) parts.push('change files');
    const counts = [];
    if (added) counts.push(plural(added, 'line', 'lines') + ' added');
    if (removed) counts.push(plural(removed, 'line', 'lines') + ' removed');
    return tool + ' will ' + parts.join(' and ') +
      (counts.length ? ' (' + counts.join(', ') + ')' : ' (no line changed)') + '.';
  }
  const paths = byKind.path || [];
  const on = paths.length ? ' on ' + listed(paths.map(quoted)) : '';
  switch (request.effect) {
    case 'read_only': return tool + ' will read' + on + ', changing nothing.';
    case 'local_write': return tool + ' will change files' + on + '.';
    case 'network': return tool + ' will reach the network' + on + ', with the arguments below.';
    default: return tool + ' will run' + on + ' with the arguments below; it may not be undone.';
  }
}

const LABELS = {
  allow_once: 'Allow once',
  allow_workspace: 'Allow for this workspace',
  reject: 'Reject',
};

function card(request) {
  const root = el('article', 'request');
  root.dataset.id = request.id;
  root.dataset.tool = request.tool;
  // A hook of the operator's asked for this approval: said first, with its reason, since the
  // call may be one that no policy would ask about.
  for (const sentence of request.hook_ask_sentences || []) {
    root.appendChild(el('p', 'hook-ask', sentence));
  }
  root.appendChild(el('p', 'summary', summary(request)));
  root.appendChild(el('h3', null, request.tool + ' ' + request.version));

  const dl = el('dl');
  field(dl, 'effect', request.effect);
  field(dl, 'workspace', (request.workspace_root || '') + ' (' + request.workspace.slice(0, 12) + ')');
  field(dl, 'surface', request.surface);
  field(dl, 'actor', request.actor);
  // The client's own words about itself: anything could be claimed, so they are shown as a claim.
  if (request.client) field(dl, 'client', request.client + ' (as the client names itself)');
  const hooks = (request.hook_asks || []).map((ask) => 'hook ' + ask.name);
  const policies = request.policies.length ? ['policy ' + request.policies.join(', ')] : [];
  const askedBy = hooks.concat(policies).join('; ') || 'no policy';
  field(dl, 'asked by', request.approval_mode === 'each_call'
    ? askedBy + '; the tool asks on each call'
    : askedBy);
  if (request.resources.length) field(dl, 'resources', request.resources.join('\n'));
  const expires = el('dd', 'expires');
  dl.appendChild(el('dt', null, 'expires in'));
  dl.appendChild(expires);
  root.appendChild(dl);

  // What the admission lint found in the tool's pinned descriptor: it informs, decides nothing.
  const flags = request.descriptor_flags || [];
  if (flags.length) {
    const box = el('section', 'descriptor-flags');
    box.appendChild(el('h4', null, 'descriptor flags (' + flags.length +
      '): the tool\'s pinned descriptor reads like tool poisoning; nothing was refused for it'));
    const list = el('ul');
    for (const flag of flags) {
      list.appendChild(el('li', 'flag ' + flag.kind,
        flag.kind + ' ' + flag.rule + ' at ' + flag.at + ': "' + flag.excerpt + '" — ' + flag.explanation));
    }
    box.appendChild(list);
    root.appendChild(box);
  }

  if (request.preview) {
    if (request.preview_kind === 'diff') {
      root.appendChild(diffBlock(request.preview));
    } else {
      const pre = el('pre', request.preview_kind, request.preview);
      pre.dataset.kind = request.preview_kind;
      root.appendChild(pre);
    }
  }
  const args = el('details', 'arguments');
  // Without a preview (an upstream's tool), the arguments are what will run: shown open.
  args.open = request.preview_kind === 'text' || !request.preview;
  args.appendChild(el('summary', null, 'arguments'));
  args.appendChild(el('pre', null, JSON.stringify(request.arguments, null, 2)));
  root.appendChild(args);

  if (request.workspace_scope) {
    root.appendChild(el('p', 'scope', 'Allow for this workspace covers ' + request.workspace_scope + '.'));
  }

  const actions = el('div', 'actions');
  const reason = el('input');
  reason.type = 'text';
  reason.maxLength = 2000;
  reason.placeholder = 'reason for the model (optional, sent on reject)';
  reason.setAttribute('aria-label', 'reason');
  reason.name = 'reason';
  const message = el('p', 'error-text');
  for (const choice of request.choices) {
    const button = el('button', choice, LABELS[choice] || choice);
    button.type = 'button';
    button.dataset.choice = choice;
    button.addEventListener('click', async () => {
      for (const b of actions.querySelectorAll('button')) b.disabled = true;
      const body = { decision: choice };
      if (choice === 'reject' && reason.value.trim()) body.reason = reason.value;
      try {
        await post('/api/pending/' + encodeURIComponent(request.id) + '/decision', body);
        root.remove();
        cards.delete(request.id);
        refresh();
      } catch (e) {
        setText(message, e.message);
        for (const b of actions.querySelectorAll('button')) b.disabled = false;
      }
    });
    actions.appendChild(button);
  }
  if (request.choices.includes('reject')) actions.appendChild(reason);
  root.appendChild(actions);
  root.appendChild(message);
  return { root, expires };
}

function renderPending(list) {
  const container = document.getElementById('pending');
  const seen = new Set();
  for (const request of list) {
    seen.add(request.id);
    let entry = cards.get(request.id);
    if (!entry) {
      entry = card(request);
      cards.set(request.id, entry);
      container.appendChild(entry.root);
    }
    entry.expires.textContent = Math.ceil(request.expires_in_ms / 1000) + ' s';
  }
  for (const [id, entry] of cards) {
    if (!seen.has(id)) {
      entry.root.remove();
      cards.delete(id);
    }
  }
  document.getElementById('pending-empty').hidden = list.length > 0;
  document.title = (list.length ? '(' + list.length + ') ' : '') + 'toolgate — approval console';
}

function renderGrants(list) {
  const ul = document.getElementById('grants');
  ul.replaceChildren();
  for (const grant of list) {
    const li = el('li');
    li.dataset.id = grant.id;
    li.appendChild(el('span', null, grant.covers + ' (until ' + new Date(grant.expires_at_ms).toLocaleString() + ') '));
    const button = el('button', 'revoke', 'Revoke');
    button.type = 'button';
    button.addEventListener('click', async () => {
      button.disabled = true;
      try {
        await post('/api/grants/' + encodeURIComponent(grant.id) + '/revoke');
      } catch (e) {
        setStatus(e.message, true);
      }
      refresh();
    });
    li.appendChild(button);
    ul.appendChild(li);
  }
  document.getElementById('grants-empty').hidden = list.length > 0;
}

function renderOutcomes(list) {
  const body = document.querySelector('#outcomes tbody');
  body.replaceChildren();
  for (const outcome of list) {
    const tr = el('tr');
    tr.appendChild(el('td', null, new Date(outcome.at_ms).toLocaleTimeString()));
    tr.appendChild(el('td', null, outcome.tool));
    tr.appendChild(el('td', outcome.status, outcome.status));
    tr.appendChild(el('td', null, [outcome.stage, outcome.code].filter(Boolean).join(' / ')));
    tr.appendChild(el('td', null, outcome.actor + ' (' + outcome.surface + ')'));
    tr.appendChild(el('td', 'client', outcome.client ? outcome.client + ' (as it names itself)' : ''));
    body.appendChild(tr);
  }
}

// The workspace's `.toolgate/` configuration, read afresh by the server on each request. The
// trust button posts the digest of the files shown here: if they changed since, the server
// refuses (409) and sends them as they stand now, which are shown instead.
const PROJECT_POLL_MS = 5000;
const PROJECT_STATUS = {
  none: 'This workspace has no .toolgate/ configuration.',
  untrusted: 'Not trusted: it applies only where it narrows what your configuration allows.',
  changed: 'Changed since you trusted it: it applies only where it narrows until you trust it again. What changed is below.',
  trusted: 'Trusted as it stands.',
  error: 'It cannot be read, and nothing of it can be trusted: ',
};
let projectShown = null;
// The digest the trust button was last offered for: a poll that finds other files (or none
// that can be read) takes the offer back until the person presses Read again, however the
// files change after (the button would trust files they may not have looked at).
let projectOffered = null;
let projectStale = false;

function itemList(title, items) {
  const box = el('div', 'project-items');
  box.appendChild(el('h3', null, title + ' (' + items.length + ')'));
  const list = el('ul');
  for (const item of items) list.appendChild(el('li', null, item.place + ': ' + item.what));
  box.appendChild(list);
  return box;
}

function renderProject(view, polled) {
  const text = JSON.stringify(view);
  if (text === projectShown) return;
  projectShown = text;
  if (polled && projectOffered !== null && view.digest !== projectOffered) projectStale = true;
  projectOffered = view.digest || null;
  // A workspace without `.toolgate/` has nothing to show or trust.
  document.getElementById('project').hidden = view.status === 'none';
  const status = document.getElementById('project-status');
  setText(status, view.workspace + '/.toolgate: ' + (PROJECT_STATUS[view.status] || view.status) +
    (view.status === 'error' ? view.error : ''));
  status.className = 'project-status ' + view.status;
  status.dataset.status = view.status;
  const body = document.getElementById('project-body');
  body.replaceChildren();
  if (view.digest) body.appendChild(el('p', 'scope', 'digest of all its files: ' + view.digest));
  if (view.files.length) {
    const files = el('div', 'project-files');
    files.appendChild(el('h3', null, 'Files (' + view.files.length + ')'));
    const list = el('ul');
    for (const file of view.files) list.appendChild(el('li', null, file.path + '  ' + file.digest));
    files.appendChild(list);
    body.appendChild(files);
  }
  if (view.diff) {
    body.appendChild(el('h3', null, 'Changed since trusted'));
    body.appendChild(diffBlock(view.diff));
  }
  if (view.applied.length) body.appendChild(itemList('Applies now', view.applied));
  if (view.pending.length) body.appendChild(itemList('Pending until trusted', view.pending));
  if (view.ignored.length) body.appendChild(itemList('Ignored: a project may never set these', view.ignored));
  const trust = document.getElementById('project-trust');
  trust.hidden = !view.digest || view.status === 'trusted';
  trust.disabled = projectStale;
  trust.dataset.digest = view.digest || '';
  if (projectStale) {
    setText(document.getElementById('project-message'),
      'The files changed while they were shown; what is shown now is different. Look at them again, then press Read again to trust them.');
  }
}

async function refreshProject(polled) {
  try {
    const response = await fetch('/api/project', { credentials: 'same-origin', cache: 'no-store' });
    // A console started without a workspace's configuration to show has no such route.
    if (response.status === 404) return;
    if (!response.ok) throw new Error('/api/project: ' + response.status + ' ' + (await response.text()));
    renderProject(await response.json(), polled);
  } catch (e) {
    setText(document.getElementById('project-message'), e.message);
  }
}

async function trustProject() {
  const button = document.getElementById('project-trust');
  const message = document.getElementById('project-message');
  button.disabled = true;
  setText(message, '');
  try {
    const response = await fetch('/api/project/trust', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-toolgate-csrf': CSRF },
      body: JSON.stringify({ digest: button.dataset.digest }),
    });
    if (response.status === 409) {
      projectShown = null;
      renderProject(await response.json());
      setText(message, 'Nothing was trusted: the files changed since they were shown. They are shown as they stand now; look at them again.');
      return;
    }
    if (!response.ok) throw new Error((await response.text()).trim() || String(response.status));
    renderProject(await response.json());
    setText(message, '');
  } catch (e) {
    setText(message, e.message);
    button.disabled = false;
  }
}

document.getElementById('project-trust').addEventListener('click', trustProject);
document.getElementById('project-reload').addEventListener('click', () => {
  projectShown = null;
  projectOffered = null;
  projectStale = false;
  setText(document.getElementById('project-message'), '');
  refreshProject(false);
});

let polling = false;
async function refresh() {
  if (polling) return;
  polling = true;
  try {
    const [pending, grants, outcomes] = await Promise.all([
      getJson('/api/pending'), getJson('/api/grants'), getJson('/api/outcomes'),
    ]);
    renderPending(pending);
    renderGrants(grants);
    renderOutcomes(outcomes);
    setStatus('connected; ' + pending.length + ' waiting', false);
  } catch (e) {
    setStatus('cannot reach toolgate: ' + e.message + ' (if `toolgate serve` still runs, `toolgate console --workspace DIR` prints a fresh login link)', true);
  } finally {
    polling = false;
  }
}

refresh();
setInterval(refresh, POLL_MS);
refreshProject(false);
setInterval(() => refreshProject(true), PROJECT_POLL_MS);
