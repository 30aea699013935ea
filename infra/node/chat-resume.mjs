// chat-resume runs the AI SDK's own chat client (AbstractChat with DefaultChatTransport, what
// useChat runs in a page) against the harness's chat API at /chat, twice:
//
//   uninterrupted  send a message on one conversation and read the turn to its end;
//   reload         send the same message on another conversation, drop the connection once the
//                  first tool output has arrived (what a page reload does), then a new chat
//                  client for the same conversation, holding only the user's message as a
//                  reloaded page would, calls resumeStream() and reads the rest.
//
// Usage: node chat-resume.mjs <baseUrl> <accountSecret> <agentId>   (Node 22)
// Prints one JSON object: {uninterrupted, resumed, droppedAfter} with each client's final
// messages and the chunk types the first reload client saw before it dropped. Exits 1 with the
// problem on stderr.

import { AbstractChat, DefaultChatTransport } from 'ai';

const [baseUrl, secret, agentId] = process.argv.slice(2);
if (!baseUrl || !secret || !agentId) {
  process.stderr.write('usage: node chat-resume.mjs <baseUrl> <accountSecret> <agentId>\n');
  process.exit(2);
}
setTimeout(() => fail('the scenario did not finish within 60 s'), 60_000).unref();

function fail(message) {
  process.stderr.write(`chat-resume: ${message}\n`);
  process.exit(1);
}

// State is the chat state a framework keeps (React's useChat keeps it in React state).
class State {
  constructor(messages = []) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }
  pushMessage(m) {
    this.messages = [...this.messages, m];
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(i, m) {
    this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)];
  }
  snapshot(x) {
    return structuredClone(x);
  }
}

class Chat extends AbstractChat {
  constructor(id, messages, onChunk) {
    const transport = new DefaultChatTransport({
      api: `${baseUrl}/chat`,
      headers: { Authorization: `Bearer ${secret}` },
      body: { agentId },
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        if (!onChunk || !res.body) return res;
        // Watch the chunks go by, so the reload can drop the connection at a chosen point.
        const [mine, theirs] = res.body.tee();
        (async () => {
          const reader = mine.pipeThrough(new TextDecoderStream()).getReader();
          try {
            for (;;) {
              const { value, done } = await reader.read();
              if (done) return;
              for (const line of value.split('\n')) {
                if (line.startsWith('data: {')) onChunk(JSON.parse(line.slice(6)));
              }
            }
          } catch {}
        })();
        return new Response(theirs, { status: res.status, headers: res.headers });
      },
    });
    const state = new State(messages);
    super({ id, transport, state, onError: (e) => (state.lastError = e) });
    this.stateRef = state;
  }
}

function userMessage(text) {
  return { id: `u-${Math.random().toString(36).slice(2)}`, role: 'user', parts: [{ type: 'text', text }] };
}

const text = 'Deploy the build, then tell me how it went';

// uninterrupted
const a = new Chat(`conv-a-${Date.now()}`);
await a.sendMessage(userMessage(text));
if (a.status !== 'ready') fail(`the uninterrupted turn ended ${a.status}: ${a.stateRef.lastError}`);

// reload: drop the connection once a tool output has arrived.
const convB = `conv-b-${Date.now()}`;
const seen = [];
let dropped;
const droppedPromise = new Promise((resolve) => (dropped = resolve));
const b1 = new Chat(convB, [], (chunk) => {
  seen.push(chunk.type);
  if (chunk.type === 'tool-output-available') dropped();
});
const user = userMessage(text);
const sending = b1.sendMessage(user);
await Promise.race([droppedPromise, sending]);
await b1.stop();
await sending.catch(() => {});
if (seen.includes('finish')) fail(`the first client read the whole turn before it could drop: ${seen.join(', ')}`);

// The reloaded page: a new client holding the user's message resumes the conversation's stream.
const b2 = new Chat(convB, [structuredClone(user)]);
await b2.resumeStream();
if (b2.status !== 'ready') fail(`the resumed client ended ${b2.status}: ${b2.stateRef.lastError}`);

process.stdout.write(
  JSON.stringify({ uninterrupted: a.messages, resumed: b2.messages, droppedAfter: seen }) + '\n',
  () => process.exit(0),
);
