// toolgate approval console. Every string shown here may have been written by a model, so
// text reaches the page only through `textContent`; nothing is parsed as HTML.
'use strict';

const CSRF = document.querySelector('meta[name="toolgate-csrf"]').content;
const POLL_MS = 1000;
const cards = new Map();

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function setStatus(text, isError) {
  const status = document.getElementById('status');
  status.textContent = text;
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

const LABELS = {
  allow_once: 'Allow once',
  allow_workspace: 'Allow for this workspace',
  reject: 'Reject',
};

function card(request) {
  const root = el('article', 'request');
  root.dataset.id = request.id;
  root.dataset.tool = request.tool;
  root.appendChild(el('h3', null, request.tool + ' ' + request.version));

  const dl = el('dl');
  field(dl, 'effect', request.effect);
  field(dl, 'workspace', (request.workspace_root || '') + ' (' + request.workspace.slice(0, 12) + ')');
  field(dl, 'surface', request.surface);
  field(dl, 'actor', request.actor);
  const askedBy = request.policies.length ? 'policy ' + request.policies.join(', ') : 'no policy';
  field(dl, 'asked by', request.approval_mode === 'each_call'
    ? askedBy + '; the tool asks on each call'
    : askedBy);
  if (request.resources.length) field(dl, 'resources', request.resources.join('\n'));
  const expires = el('dd', 'expires');
  dl.appendChild(el('dt', null, 'expires in'));
  dl.appendChild(expires);
  root.appendChild(dl);

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
  args.open = request.preview_kind === 'text';
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
        message.textContent = e.message;
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
    body.appendChild(tr);
  }
}

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
    setStatus('cannot reach toolgate: ' + e.message + ' (open the address `toolgate serve` printed)', true);
  } finally {
    polling = false;
  }
}

refresh();
setInterval(refresh, POLL_MS);
