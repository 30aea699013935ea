// check-ui-stream reads one SSE turn body on stdin and checks it the way an AI SDK v7 client
// reads it: every chunk must pass the `ai` package's uiMessageChunkSchema, the stream must end
// with `data: [DONE]` and nothing may follow it, and readUIMessageStream must be able to build
// the message. On success it prints one line: {"chunkTypes":[...],"message":<final UIMessage>}.
// On failure it names the offending chunk on stderr and exits 1.
//
// Usage: node check-ui-stream.mjs [message.json] < body.sse   (Node 22; run from any directory)
//
// With message.json (a UIMessage, such as the "message" an earlier run printed), the stream
// continues that message, as a chat client's next response to the same assistant message does.
//
// The schema is made of loose objects, so unknown keys pass here: keep extras in data-* parts.
// Response headers are not part of the body; check x-vercel-ai-ui-message-stream: v1 yourself.

import { readFile } from 'node:fs/promises';
import {
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
  UIMessageStreamError,
} from 'ai';

function fail(message) {
  process.stderr.write(`check-ui-stream: ${message}\n`);
  process.exit(1);
}

function clip(text, n = 300) {
  return text.length > n ? `${text.slice(0, n)}…` : text;
}

// sseData splits an SSE body into the data of its dispatched events, per the SSE spec:
// an event ends at a blank line, and anything after the last blank line is never dispatched.
// parseJsonEventStream drops [DONE] silently, so the framing is checked on this view.
function sseData(text) {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  const tail = lines.pop();
  const events = [];
  let data = null;
  for (const line of lines) {
    if (line === '') {
      if (data !== null) events.push(data);
      data = null;
      continue;
    }
    const colon = line.indexOf(':');
    if (colon === 0) continue; // comment
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data = data === null ? value : `${data}\n${value}`;
  }
  // pending: an event whose blank line never came; tail: a last line without its newline.
  return { events, pending: data, tail };
}

// why explains a schema rejection through the union branch whose type literal matched, rather
// than zod's report on every branch of the union.
function why(error) {
  const union = error?.cause?.issues?.find(issue => issue.code === 'invalid_union');
  if (!union) return error?.message ?? String(error);
  const typeIssue = issue => issue.path.length === 1 && issue.path[0] === 'type';
  const matched = union.errors.filter(branch => !branch.some(typeIssue));
  if (matched.length === 0) return 'unknown chunk type';
  return matched.flat().map(issue => `${issue.path.join('.') || '(chunk)'}: ${issue.message}`).join('; ');
}

const body = Buffer.concat(await process.stdin.toArray());
const { events, pending, tail } = sseData(body.toString('utf8'));

const done = events.indexOf('[DONE]');
if (done < 0) {
  fail(pending === '[DONE]' || /^data: ?\[DONE\]$/.test(tail)
    ? 'data: [DONE] is not followed by a blank line'
    : `missing data: [DONE] terminator after ${events.length} events`);
}
if (done < events.length - 1) {
  fail(`${events.length - 1 - done} event(s) after data: [DONE], first: ${clip(events[done + 1])}`);
}
if (pending !== null || tail !== '') {
  fail(`unterminated data after data: [DONE]: ${clip(JSON.stringify(pending ?? tail))}`);
}

const chunks = [];
const parsed = parseJsonEventStream({
  stream: new Response(body).body,
  schema: uiMessageChunkSchema,
});
for await (const result of parsed) {
  const n = chunks.length;
  if (!result.success) {
    const raw = events[n] ?? '';
    const type = /"type"\s*:\s*"([^"]*)"/.exec(raw)?.[1];
    fail(`chunk ${n + 1}${type ? ` (${type})` : ''} rejected by uiMessageChunkSchema: ${why(result.error)}: ${clip(raw)}`);
  }
  chunks.push(result.value);
}
if (chunks.length !== done) {
  fail(`parseJsonEventStream saw ${chunks.length} chunks, the SSE framing ${done}`);
}

// An `error` chunk is a valid part of a turn (readUIMessageStream reports it through onError);
// any other error means the chunk sequence cannot be assembled into a message.
const errorTexts = new Set(chunks.filter(c => c.type === 'error').map(c => c.errorText));
let message = null;
const from = process.argv[2];
const snapshots = readUIMessageStream({
  message: from ? JSON.parse(await readFile(from, 'utf8')) : undefined,
  stream: ReadableStream.from(chunks),
  onError(error) {
    if (!UIMessageStreamError.isInstance(error) && errorTexts.has(error?.message)) return;
    const where = error?.chunkType ? ` at ${error.chunkType}${error.chunkId ? ` ${error.chunkId}` : ''}` : '';
    fail(`readUIMessageStream failed${where}: ${error?.message ?? error}`);
  },
});
for await (const snapshot of snapshots) message = snapshot;

process.stdout.write(`${JSON.stringify({ chunkTypes: chunks.map(c => c.type), message })}\n`);
