// approval-client drives tool approval against the harness with the AI SDK v7's own client
// machinery: an AbstractChat over DefaultChatTransport that resends by itself once every
// approval is answered (lastAssistantMessageIsCompleteWithApprovalResponses), as useChat does.
//
//   1. approve: ask, see the approval request, approve, get the tool's output and the answer;
//   2. deny: ask in a new conversation, deny with a reason, get output-denied and an answer;
//   3. again: a new message in the denied conversation streams a new turn (it is not stuck).
//
// Usage: node approval-client.mjs <serverURL> <accountSecret> <agentId>   (Node 22)
// Prints one JSON line: {"approve":…,"deny":…,"again":…,"requests":[…]}, each phase with its
// conversation id, approval id, the parts of the last assistant message after the request and
// after the resend, the chat status and error. Exits 1, naming the problem on stderr, on a
// client error (onError) or a state the flow cannot go on from; the summary is printed anyway.

import { setTimeout as sleep } from 'node:timers/promises';
import {
  AbstractChat,
  DefaultChatTransport,
  generateId,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from 'ai';

const [url, secret, agentId] = process.argv.slice(2);
if (!url || !secret || !agentId) {
  process.stderr.write('usage: node approval-client.mjs <serverURL> <accountSecret> <agentId>\n');
  process.exit(2);
}

const summary = { requests: [] };
const problems = [];
function end() {
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  for (const p of problems) process.stderr.write(`approval-client: ${p}\n`);
  process.exit(problems.length > 0 ? 1 : 0);
}
function fail(message) {
  problems.push(message);
  end();
}
// A turn that never finishes would hang the chat's promises forever.
setTimeout(() => fail('timed out after 30s'), 30_000).unref();

// ChatState keeps the chat in memory, replacing arrays rather than mutating them, as the
// framework states (React, Vue, Svelte) do.
class MemoryState {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage = m => { this.messages = [...this.messages, m]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.messages = this.messages.with(i, m); };
  snapshot = thing => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new MemoryState() });
  }
}

// record notes what each POST carried, to show how the AI SDK phrased the resend.
async function recordingFetch(input, init) {
  const body = JSON.parse(init.body);
  const last = body.messages?.at(-1);
  const res = await fetch(input, init);
  summary.requests.push({
    id: body.id, agentId: body.agentId, trigger: body.trigger, messageId: body.messageId ?? null,
    lastMessage: last && { id: last.id, role: last.role, parts: last.parts.map(partView) },
    status: res.status,
  });
  return res;
}

function partView(p) {
  const v = { type: p.type };
  for (const k of ['state', 'toolCallId', 'approval', 'input', 'output', 'errorText', 'text']) {
    if (p[k] !== undefined) v[k] = p[k];
  }
  return v;
}

function newChat() {
  let finished;
  const chat = new Chat({
    id: `conv-${generateId()}`,
    transport: new DefaultChatTransport({
      api: url,
      headers: { Authorization: `Bearer ${secret}` },
      body: { agentId },
      fetch: recordingFetch,
    }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onError: error => problems.push(`chat ${chat.id}: onError: ${error?.message ?? error}`),
    onFinish: () => finished?.(),
  });
  // settle runs start and waits for the request it causes to finish. addToolApprovalResponse
  // does not await the resend it fires, so the end is observed through onFinish; one macrotask
  // more lets a further automatic send begin, which the status would then show.
  chat.settle = async start => {
    const done = new Promise(resolve => { finished = resolve; });
    await start();
    await done;
    await sleep(0);
    if (problems.length > 0) end();
    if (chat.status !== 'ready') fail(`chat ${chat.id}: status ${chat.status} after the request, want ready`);
  };
  return chat;
}

function lastAssistant(chat) {
  return chat.messages.findLast(m => m.role === 'assistant');
}

// pendingApproval returns the approval id of the one tool part awaiting an answer.
function pendingApproval(chat) {
  const parts = (lastAssistant(chat)?.parts ?? []).filter(p => p.state === 'approval-requested');
  if (parts.length !== 1) fail(`chat ${chat.id}: ${parts.length} parts in state approval-requested, want 1`);
  return parts[0].approval.id;
}

function view(chat) {
  return {
    status: chat.status,
    error: chat.error?.message ?? null,
    messages: chat.messages.length,
    messageId: lastAssistant(chat)?.id ?? null,
    parts: lastAssistant(chat)?.parts.map(partView) ?? [],
  };
}

// ask sends text and returns the phase so far: the request's outcome and its approval id.
async function ask(chat, text) {
  await chat.settle(() => chat.sendMessage({ text }));
  const phase = { conversationId: chat.id, requested: view(chat) };
  summary[chat.phase] = phase;
  phase.approvalId = pendingApproval(chat);
  return phase;
}

async function answer(chat, phase, approved, reason) {
  await chat.settle(() => chat.addToolApprovalResponse({ id: phase.approvalId, approved, reason }));
  phase.final = view(chat);
}

const approveChat = newChat();
approveChat.phase = 'approve';
await answer(approveChat, await ask(approveChat, 'deploy it'), true);

const denyChat = newChat();
denyChat.phase = 'deny';
await answer(denyChat, await ask(denyChat, 'deploy it'), false, 'not today');

// The same chat object carries on: the server must take a new message after the denial.
denyChat.phase = 'again';
await ask(denyChat, 'try again');

end();
