// kiln's chat page: a conversation streamed from this server's /v1/chat/completions. It talks
// to the server that served it and nothing else (the page's Content-Security-Policy enforces
// that), keeps the conversation in memory only, and the API key, when the server asks for
// one, in this tab's sessionStorage.
import { renderText } from './render.js';
import { sseData } from './sse.js';

const KEY_STORAGE = 'kiln.apiKey';
const SETTINGS_STORAGE = 'kiln.settings';

const $ = (id) => document.getElementById(id);
const ui = {
  messages: $('messages'),
  emptyNote: $('empty-note'),
  prompt: $('prompt'),
  send: $('send'),
  stop: $('stop'),
  newChat: $('new-chat'),
  status: $('status'),
  modelName: $('model-name'),
  settings: $('settings'),
  settingsToggle: $('settings-toggle'),
  systemPrompt: $('system-prompt'),
  temperature: $('temperature'),
  maxTokens: $('max-tokens'),
  keyDialog: $('key-dialog'),
  keyReason: $('key-reason'),
  keyInput: $('key-input'),
  keySave: $('key-save'),
  keyCancel: $('key-cancel'),
};

const state = {
  history: [],        // the conversation sent with each request: {role, content}
  model: null,        // the served model's id, from /v1/models
  controller: null,   // the AbortController of the reply being streamed
  keyPrompt: null,    // the open key dialog's promise, shared by every request that got a 401
  conversation: 0,    // counts "New chat"s: a reply ending after one belongs to no conversation
};

// ---- the API key ----

function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || '';
}

function headers(extra = {}) {
  const key = apiKey();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

// Shows the key dialog (once, however many requests were refused); resolves true when the user
// gave a key, false when they cancelled.
function askForKey() {
  if (state.keyPrompt) return state.keyPrompt;
  const refused = apiKey() !== '';
  sessionStorage.removeItem(KEY_STORAGE);
  ui.keyReason.textContent = refused
    ? 'The server refused that key. Enter the key it was started with.'
    : 'This server was started with an API key; enter it to chat.';
  ui.keyInput.value = '';
  state.keyPrompt = new Promise((resolve) => {
    const finish = (given) => {
      ui.keySave.removeEventListener('click', save);
      ui.keyCancel.removeEventListener('click', cancel);
      ui.keyInput.removeEventListener('keydown', onKey);
      ui.keyDialog.removeEventListener('cancel', cancel);
      if (ui.keyDialog.open) ui.keyDialog.close();
      state.keyPrompt = null;
      resolve(given);
    };
    const save = () => {
      const key = ui.keyInput.value.trim();
      if (!key) {
        ui.keyInput.focus();
        return;
      }
      sessionStorage.setItem(KEY_STORAGE, key);
      finish(true);
    };
    const cancel = (event) => {
      if (event) event.preventDefault();
      finish(false);
    };
    const onKey = (event) => {
      if (event.key === 'Enter') {
        event.preventDefault();
        save();
      }
    };
    ui.keySave.addEventListener('click', save);
    ui.keyCancel.addEventListener('click', cancel);
    ui.keyInput.addEventListener('keydown', onKey);
    ui.keyDialog.addEventListener('cancel', cancel);  // Escape
    ui.keyDialog.showModal();
    ui.keyInput.focus();
  });
  return state.keyPrompt;
}

// fetch() that asks for the key on a 401 and tries again with it; null when the user cancelled.
async function authorizedFetch(url, options = {}) {
  for (;;) {
    const response = await fetch(url, { ...options, headers: headers(options.headers) });
    if (response.status !== 401) return response;
    if (!(await askForKey())) return null;
  }
}

// The server's error text: kiln answers {"error": {"message": ...}}.
async function errorText(response) {
  const body = await response.text();
  try {
    const message = JSON.parse(body)?.error?.message;
    if (message) return message;
  } catch {
    // not JSON: the body as it is
  }
  return body || `HTTP ${response.status}`;
}

// ---- status line and settings ----

function showStatus(text) {
  ui.status.textContent = text;
}

function loadSettings() {
  try {
    const saved = JSON.parse(localStorage.getItem(SETTINGS_STORAGE) || '{}');
    if (typeof saved.system === 'string') ui.systemPrompt.value = saved.system;
    if (saved.temperature !== undefined) ui.temperature.value = saved.temperature;
    if (saved.maxTokens !== undefined) ui.maxTokens.value = saved.maxTokens;
  } catch {
    localStorage.removeItem(SETTINGS_STORAGE);
  }
}

function saveSettings() {
  localStorage.setItem(SETTINGS_STORAGE, JSON.stringify({
    system: ui.systemPrompt.value,
    temperature: ui.temperature.value,
    maxTokens: ui.maxTokens.value,
  }));
}

// The sampling fields of a request; a field left empty or out of range is left to the server
// (max tokens left empty: the reply may run to the end of the context).
function samplingFields() {
  const out = {};
  const temperature = Number.parseFloat(ui.temperature.value);
  if (Number.isFinite(temperature) && temperature >= 0) out.temperature = temperature;
  const maxTokens = Number.parseInt(ui.maxTokens.value, 10);
  if (Number.isInteger(maxTokens) && maxTokens > 0) out.max_tokens = maxTokens;
  return out;
}

// ---- the conversation ----

function scrollToEnd() {
  ui.messages.scrollTop = ui.messages.scrollHeight;
}

// One message's element: <article class="message user|assistant"> with its text and, for
// replies, a line of facts (tokens, speed) below it.
function addMessage(role, text) {
  ui.emptyNote.hidden = true;
  const article = document.createElement('article');
  article.className = `message ${role}`;
  const who = document.createElement('h2');
  who.className = 'who';
  who.textContent = role === 'user' ? 'You' : (state.model || 'Assistant');
  const body = document.createElement('div');
  body.className = 'body';
  renderText(body, text);
  const meta = document.createElement('p');
  meta.className = 'meta';
  article.append(who, body, meta);
  ui.messages.append(article);
  scrollToEnd();
  return { article, body, meta };
}

function setBusy(busy) {
  ui.send.disabled = busy;
  ui.stop.disabled = !busy;
  document.body.classList.toggle('busy', busy);
}

function replyFacts(tokens, counted, firstAt, lastAt, startAt) {
  const facts = [`${counted ? '≈' : ''}${tokens} token${tokens === 1 ? '' : 's'}`];
  if (tokens > 1 && lastAt > firstAt) {
    facts.push(`${((tokens - 1) / ((lastAt - firstAt) / 1000)).toFixed(1)} tokens/s`);
  }
  if (firstAt) facts.push(`first token after ${((firstAt - startAt) / 1000).toFixed(2)} s`);
  return facts.join(' · ');
}

const FINISH_NOTES = {
  length: 'stopped at the max tokens limit',
  abort: 'the server ended the reply',
};

// Streams the assistant's reply to the conversation so far into a new message.
async function streamReply() {
  const messages = [];
  const system = ui.systemPrompt.value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...state.history);
  const request = {
    messages,
    stream: true,
    stream_options: { include_usage: true },
    ...samplingFields(),
  };
  if (state.model) request.model = state.model;

  const conversation = state.conversation;
  const controller = new AbortController();
  state.controller = controller;
  setBusy(true);
  showStatus('');
  const reply = addMessage('assistant', '');
  reply.article.dataset.state = 'streaming';
  reply.article.setAttribute('aria-busy', 'true');
  let text = '';
  let chunks = 0;
  let usage = null;
  let finish = null;
  const startAt = performance.now();
  let firstAt = 0;
  let lastAt = 0;
  let renderQueued = false;
  const render = () => {
    renderQueued = false;
    renderText(reply.body, text);
    scrollToEnd();
  };
  try {
    const response = await authorizedFetch('/v1/chat/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: JSON.stringify(request),
      signal: controller.signal,
    });
    if (response === null) throw new Error('no API key given; the server refuses requests without one');
    if (!response.ok) throw new Error(await errorText(response));
    for await (const data of sseData(response)) {
      if (data === '[DONE]') break;
      const event = JSON.parse(data);
      if (event.error) throw new Error(event.error.message || JSON.stringify(event.error));
      if (event.usage) usage = event.usage;
      const choice = event.choices && event.choices[0];
      if (!choice) continue;
      const piece = choice.delta && choice.delta.content;
      if (piece) {
        lastAt = performance.now();
        if (!firstAt) firstAt = lastAt;
        text += piece;
        chunks += 1;
        if (!renderQueued) {
          renderQueued = true;
          requestAnimationFrame(render);
        }
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
    reply.article.dataset.state = 'done';
  } catch (error) {
    if (error.name === 'AbortError') {
      reply.article.dataset.state = 'stopped';
      finish = 'stopped';
    } else {
      reply.article.dataset.state = 'error';
      reply.article.classList.add('error');
      const message = error.message || String(error);
      if (text === '') {
        reply.body.replaceChildren(Object.assign(document.createElement('p'), { textContent: message }));
        reply.body.setAttribute('role', 'alert');
      } else {
        showStatus(message);  // the reply keeps the text it got; the error goes below
      }
    }
  } finally {
    state.controller = null;
    setBusy(false);
    reply.article.removeAttribute('aria-busy');
  }
  if (conversation !== state.conversation) return true;  // cleared by "New chat" meanwhile
  const outcome = reply.article.dataset.state;
  if (outcome !== 'error' || text !== '') renderText(reply.body, text);
  // A reply that produced nothing because it was stopped or failed is no turn; an empty reply
  // the model chose to end at once is one (the roles keep alternating).
  const answered = text !== '' || outcome === 'done';
  if (answered) state.history.push({ role: 'assistant', content: text });
  const tokens = usage ? usage.completion_tokens : chunks;
  const facts = [];
  if (text !== '' || usage) facts.push(replyFacts(tokens, !usage, firstAt, lastAt, startAt));
  if (finish === 'stopped') facts.push('stopped');
  else if (FINISH_NOTES[finish]) facts.push(FINISH_NOTES[finish]);
  reply.meta.textContent = facts.join(' · ');
  reply.meta.dataset.tokens = String(tokens);
  scrollToEnd();
  return answered;
}

async function send() {
  const text = ui.prompt.value;
  if (text.trim() === '' || state.controller) return;
  ui.prompt.value = '';
  state.history.push({ role: 'user', content: text });
  const mine = addMessage('user', text);
  const conversation = state.conversation;
  const answered = await streamReply();
  if (!answered && conversation === state.conversation) {
    // The turn did not happen: it leaves the conversation (so the next request does not carry
    // it twice) and its text goes back to the box to be sent again.
    state.history.pop();
    mine.article.classList.add('unsent');
    if (ui.prompt.value === '') ui.prompt.value = text;
  }
  ui.prompt.focus();
}

function stop() {
  if (state.controller) state.controller.abort();
}

function newChat() {
  stop();
  state.conversation += 1;
  state.history = [];
  ui.messages.replaceChildren(ui.emptyNote);
  ui.emptyNote.hidden = false;
  showStatus('');
  ui.prompt.value = '';
  ui.prompt.focus();
}

async function loadModelName() {
  try {
    const response = await authorizedFetch('/v1/models');
    if (response === null) {
      ui.modelName.textContent = '(no API key)';
      return;
    }
    if (!response.ok) throw new Error(await errorText(response));
    const models = await response.json();
    state.model = models.data && models.data[0] ? models.data[0].id : null;
    ui.modelName.textContent = state.model || '(no model)';
    if (state.model) document.title = `${state.model} · kiln chat`;
  } catch (error) {
    ui.modelName.textContent = '(model unknown)';
    showStatus(`Could not read /v1/models: ${error.message}`);
  }
}

// ---- wiring ----

ui.prompt.addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
});
document.addEventListener('keydown', (event) => {
  if (event.key === 'Escape' && state.controller && !ui.keyDialog.open) stop();
});
ui.send.addEventListener('click', send);
ui.stop.addEventListener('click', stop);
ui.newChat.addEventListener('click', newChat);
ui.settingsToggle.addEventListener('click', () => {
  const open = ui.settings.hidden;
  ui.settings.hidden = !open;
  ui.settingsToggle.setAttribute('aria-expanded', String(open));
  if (open) ui.systemPrompt.focus();
});
for (const input of [ui.systemPrompt, ui.temperature, ui.maxTokens]) {
  input.addEventListener('change', saveSettings);
}

loadSettings();
loadModelName();
