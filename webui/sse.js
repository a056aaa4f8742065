// Server-sent events read from a fetch() response body (EventSource cannot POST a request), as
// the HTML standard's event stream format says: events end at a blank line, a "data:" line adds
// its value (one leading space dropped) to the event's data, other fields and comments are
// ignored, a line may end in LF, CR LF or CR, and an event the stream ends in the middle of is
// dropped.

// Yields the data of each event of `response`'s body, as a string, in order. Throws the fetch's
// AbortError when its signal aborts while reading.
export async function* sseData(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      // A CR at the very end may be the first half of CR LF: keep it for the next read.
      let lineEnd;
      while ((lineEnd = nextLineEnd(buffer, done)) >= 0) {
        const line = buffer.slice(0, lineEnd);
        const skip = buffer.startsWith('\r\n', lineEnd) ? 2 : 1;
        buffer = buffer.slice(lineEnd + skip);
        if (line === '') {
          if (data.length) yield data.join('\n');
          data = [];
        } else if (line.startsWith('data:')) {
          data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
        }
      }
      if (done) break;
    }
  } finally {
    reader.releaseLock();
  }
}

function nextLineEnd(buffer, atEnd) {
  for (let i = 0; i < buffer.length; i++) {
    const c = buffer[i];
    if (c === '\n') return i;
    if (c === '\r') return i + 1 < buffer.length || atEnd ? i : -1;
  }
  return -1;
}
