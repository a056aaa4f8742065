// A reply's text as page elements: prose, `inline code` and ``` fenced code blocks. Model
// output is untrusted, so it only ever becomes text nodes (textContent), never markup.

// The text split into prose and fenced code: [{kind: 'text' | 'code', text, lang}]. A fence is
// a line of three or more backticks (up to three spaces before them); the opening one may name
// a language. A block still open at the end (a reply being streamed) runs to the end.
export function splitFences(text) {
  const parts = [];
  const lines = text.split('\n');
  let prose = [];
  let code = null;  // {lang, lines, fence} while inside a block
  // Blank lines between prose and a code block are the block's margin, not more text.
  const flushProse = () => {
    if (parts.length) while (prose.length && prose[0] === '') prose.shift();
    if (code !== null) while (prose.length && prose[prose.length - 1] === '') prose.pop();
    if (prose.length) parts.push({ kind: 'text', text: prose.join('\n'), lang: '' });
    prose = [];
  };
  for (const line of lines) {
    const fence = /^ {0,3}(`{3,})(.*)$/.exec(line);
    if (code === null) {
      if (fence && !fence[2].includes('`')) {
        code = { lang: fence[2].trim(), lines: [], fence: fence[1] };
        flushProse();
      } else {
        prose.push(line);
      }
    } else if (fence && fence[1].length >= code.fence.length && fence[2].trim() === '') {
      parts.push({ kind: 'code', text: code.lines.join('\n'), lang: code.lang });
      code = null;
    } else {
      code.lines.push(line);
    }
  }
  if (code !== null) parts.push({ kind: 'code', text: code.lines.join('\n'), lang: code.lang });
  flushProse();
  return parts;
}

// Prose with `inline code` spans as <code>.
function proseElement(text) {
  const div = document.createElement('div');
  div.className = 'prose';
  const pieces = text.split(/(`[^`\n]+`)/);
  for (const piece of pieces) {
    if (piece.length > 2 && piece.startsWith('`') && piece.endsWith('`')) {
      const code = document.createElement('code');
      code.textContent = piece.slice(1, -1);
      div.append(code);
    } else if (piece) {
      div.append(document.createTextNode(piece));
    }
  }
  return div;
}

function codeElement(text, lang) {
  const figure = document.createElement('figure');
  figure.className = 'code';
  const caption = document.createElement('figcaption');
  const label = document.createElement('span');
  label.textContent = lang || 'code';
  const copy = document.createElement('button');
  copy.type = 'button';
  copy.className = 'copy';
  copy.textContent = 'Copy';
  copy.setAttribute('aria-label', `Copy the ${lang || 'code'} block`);
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(text);
      copy.textContent = 'Copied';
    } catch {
      copy.textContent = 'Copy failed';
    }
    setTimeout(() => { copy.textContent = 'Copy'; }, 1500);
  });
  caption.append(label, copy);
  const pre = document.createElement('pre');
  const code = document.createElement('code');
  if (lang) code.dataset.lang = lang;
  code.textContent = text;
  pre.append(code);
  figure.append(caption, pre);
  return figure;
}

// Replaces `target`'s children with `text` rendered.
export function renderText(target, text) {
  const nodes = splitFences(text).map(
    (part) => (part.kind === 'code' ? codeElement(part.text, part.lang) : proseElement(part.text)));
  target.replaceChildren(...nodes);
}
