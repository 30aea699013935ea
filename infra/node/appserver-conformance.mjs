// appserver-conformance runs the official Letta App Server client
// (@letta-ai/letta-code/app-server-client) against the harness's GET /ws, scenario by
// scenario, and reports what the client saw:
//
//   auth          a wrong secret: connect() rejects (the upgrade is refused);
//   info          a. connect, info() resolves;
//   tool          b. runtimeStart with external tools (lookup_ticket unscoped, dispatch_task
//                 under scope "dispatch") and a created conversation; a turn whose model calls
//                 lookup_ticket, answered with a text result by onExternalToolCall;
//   isError       c. the handler answers {is_error:true, content:[…]};
//   protocolError d. the handler throws;
//   scoped        e. plain: a turn without the "dispatch" scope whose model calls dispatch_task
//                 anyway; selected: the same with external_tool_scope_ids ["dispatch"];
//   approve, deny f. an approval-gated tool: control_request, approval_request_message,
//                 requires_approval; answered allow, then (another turn) deny with a message;
//   abort         g. a slow turn aborted while it runs; a second abort with nothing running;
//   sync          h. client A starts a turn, sees its tool call and closes while the tool runs;
//                 client B syncs and gets the turn from its start, then the rest;
//   abortApproval i. a turn held for approval is aborted: cancelled at once, and the next
//                 message is accepted right after;
//   abortTool     j. a turn waiting for the controller's tool is aborted; the handler answers
//                 late, and that answer is refused;
//   queue         k. a second message while the first runs: queued, shown by update_queue, and
//                 dequeued when it starts;
//   syncEnded     l. client A starts a turn and closes; the turn ends with nobody connected;
//                 client B syncs and gets the whole turn, and a second sync replays nothing;
//   subagent      m. a turn whose model calls a subagent: update_subagent_state snapshots;
//   tokens        n. end-user tokens minted for alice and bob (POST /accounts/me/tokens, on the
//                 delegatee alone), each on a socket opened as a browser opens it (the token as
//                 a subprotocol, no Authorization): create_agent and another agent are refused,
//                 each runs a turn in a conversation of its own, conversationList() lists that
//                 one alone, the secret's lists both, and alice cannot open bob's; alice's
//                 update_model is refused (a token may not change the agent);
//   models        o. list_models, update_model and update_toolset, which the client sends with
//                 request(): the switcher (an OpenAI-compatible model, "mock-a", that answers
//                 with its model's name) answers a turn, switches to openai/gpt-4.1-mini and
//                 answers the next on it (with reasoning_effort high); update_toolset takes
//                 "auto" and refuses "codex"; the thinker's turn streams its reasoning as a
//                 reasoning_message before its answer.
//   memory        q. write_memory_file twice, list_memory, read_memory_file, memory_history,
//                 memory_commit_diff of the second write, memory_file_at_ref of the first, a
//                 path that leaves the folder, and delete_memory_file twice (the second commits
//                 nothing), on an agent whose memory is a workspace's.
//   reregistered  t. a second socket starts a runtime the first still holds, with the same
//                 external tools; its turn calls lookup_ticket and gets the answer.
//   files         s. create_message with a base64 image beside its text (kept as a file of the
//                 conversation), an image by URL (refused), and the same with
//                 image_failure_mode "drop" (accepted, the image left out).
//   providers     r. list_connect_providers, connect_provider (openai with a key and a base URL;
//                 anthropic without a key and bedrock, refused) and disconnect_provider twice.
//   allowlist     p. an approval-gated tool's agent runs a turn with client_tool_allowlist []:
//                 the model's call of the tool is an unknown tool's, and no approval is asked.
//
// Usage: node appserver-conformance.mjs <baseUrl> <accountSecret> <agentsJSON>   (Node 22)
// agentsJSON names the agents the caller created:
//   {"tickets","missing","outage","dispatcher","approver","slow","sluggish","stepper","brief","delegator","delegatee","switcher"}
//   → agent ids.
// Prints one JSON object on stdout: per scenario the frames the client received for the
// runtime (raw), the responses it got and what its handlers were asked. Exits 1 with the
// problem on stderr when the protocol cannot go on (a refused command, a frame that never
// comes within its timeout); the summary so far is printed anyway.

import WebSocket from 'ws';
import { createAppServerClient } from '@letta-ai/letta-code/app-server-client';

const STEP_MS = 20_000;

const [baseUrl, secret, agentsJSON] = process.argv.slice(2);
if (!baseUrl || !secret || !agentsJSON) {
  process.stderr.write('usage: node appserver-conformance.mjs <baseUrl> <accountSecret> <agentsJSON>\n');
  process.exit(2);
}
const agents = JSON.parse(agentsJSON);
for (const name of ['tickets', 'missing', 'outage', 'dispatcher', 'approver', 'slow', 'sluggish', 'stepper', 'brief', 'delegator', 'delegatee', 'switcher']) {
  if (typeof agents[name] !== 'string' || agents[name] === '') {
    process.stderr.write(`agentsJSON has no agent id for ${name}\n`);
    process.exit(2);
  }
}

const summary = {};
const clients = [];

// finish prints the summary and exits once stdout has taken it all (writes to a pipe are
// asynchronous: exiting at once would cut the summary short).
function finish(code) {
  for (const c of clients) {
    try {
      c.close();
    } catch {}
  }
  process.stdout.write(JSON.stringify(summary) + '\n', () => process.exit(code));
}

// stop reports a failure and exits; fail does that and throws Stop, which ends the scenarios.
class Stop extends Error {}
let stopped = false;
function stop(message) {
  if (stopped) return;
  stopped = true;
  process.stderr.write(`appserver-conformance: ${message}\n`);
  finish(1);
}
function fail(message) {
  stop(message);
  throw new Stop(message);
}

// The whole run has an upper bound too, below the Go test's.
setTimeout(() => stop('the scenarios did not finish within 110 s'), 110_000).unref();

const lookupTicket = {
  name: 'lookup_ticket',
  description: 'Fetch a support ticket by ID.',
  parameters: {
    type: 'object',
    properties: { id: { type: 'string' } },
    required: ['id'],
    additionalProperties: false,
  },
};
const dispatchTask = {
  name: 'dispatch_task',
  description: 'Hand a task to the dispatch queue.',
  parameters: {
    type: 'object',
    properties: { task: { type: 'string' } },
    required: ['task'],
    additionalProperties: false,
  },
};
const externalTools = [{ tools: [lookupTicket] }, { scope_id: 'dispatch', tools: [dispatchTask] }];

// convOf is the conversation a frame is about: its runtime's, or a control_request's.
function convOf(f) {
  return f?.runtime?.conversation_id ?? f?.conversation_id;
}

function isDelta(f, kind) {
  return f?.type === 'stream_delta' && f.delta?.message_type === kind;
}

function brief(frames) {
  return frames.map((f) => (f.type === 'stream_delta' ? `stream_delta/${f.delta?.message_type}` : f.type)).join(', ');
}

// browserSocket is a WebSocket that opens as a browser's must with an end-user token: a browser
// cannot set Authorization on the upgrade, so the token goes as a subprotocol beside "harness",
// which the server answers with (ws, like a browser, fails the handshake otherwise).
function browserSocket(token) {
  return class extends WebSocket {
    constructor(url) {
      super(url, ['harness', `harness.bearer.${token}`]);
    }
  };
}

// Peer is one official client and every frame it received, in order. With userToken it opens its
// socket as a browser does (browserSocket), with no Authorization.
class Peer {
  constructor(name, token = secret, userToken = undefined) {
    this.name = name;
    this.frames = [];
    this.times = []; // when each frame arrived (ms)
    this.waiters = new Set();
    this.client = userToken
      ? createAppServerClient({ url: baseUrl, WebSocket: browserSocket(userToken), requestTimeoutMs: STEP_MS })
      : createAppServerClient({ url: baseUrl, WebSocket, authToken: token, requestTimeoutMs: STEP_MS });
    clients.push(this.client);
    this.client.onMessage((msg) => {
      this.frames.push(msg);
      this.times.push(Date.now());
      for (const w of [...this.waiters]) w.check();
    });
  }

  mark() {
    return this.frames.length;
  }

  // wait resolves with the index of the first frame from `from` on that pred accepts; after
  // STEP_MS it rejects naming what it waited for and the frames that came instead.
  wait(what, pred, from = 0) {
    return new Promise((resolve, reject) => {
      const w = {
        check: () => {
          for (let i = from; i < this.frames.length; i++) {
            if (pred(this.frames[i])) {
              this.waiters.delete(w);
              clearTimeout(w.timer);
              resolve(i);
              return true;
            }
          }
          return false;
        },
      };
      if (w.check()) return;
      w.timer = setTimeout(() => {
        this.waiters.delete(w);
        reject(new Error(`${this.name}: no ${what} within ${STEP_MS} ms; frames since: [${brief(this.frames.slice(from))}]; the 10 before: ${JSON.stringify(this.frames.slice(Math.max(0, from - 10), from))}`));
      }, STEP_MS);
      this.waiters.add(w);
    });
  }

  // about returns the frames in [from, to] that concern conversation conv.
  about(conv, from, to = this.frames.length - 1) {
    return this.frames.slice(from, to + 1).filter((f) => convOf(f) === conv);
  }

  // untilStop waits for the conversation's next stop_reason from `from`, and for the
  // update_loop_status that says the runtime waits again (WAITING_ON_INPUT or
  // WAITING_ON_APPROVAL; it may come just before the stop_reason or just after), and returns
  // the conversation's frames up to the later of the two.
  async untilStop(conv, from) {
    const i = await this.wait(`stop_reason for ${conv}`, (f) => isDelta(f, 'stop_reason') && convOf(f) === conv, from);
    const j = await this.wait(
      `update_loop_status WAITING_ON_… around the stop_reason for ${conv}`,
      (f) => f.type === 'update_loop_status' && convOf(f) === conv && String(f.loop_status?.status).startsWith('WAITING_ON_'),
      from,
    );
    return this.about(conv, from, Math.max(i, j));
  }
}

async function step(what, promise) {
  try {
    return await promise;
  } catch (err) {
    fail(`${what}: ${err?.message ?? err}`);
  }
}

async function connect(name, token, userToken) {
  const p = new Peer(name, token, userToken);
  await step(`${name}: connect`, p.client.connect());
  return p;
}

// start runs runtimeStart for agentId in a new conversation and waits for the replay that
// follows the response (it ends with update_queue).
async function start(peer, agentId, tools) {
  const from = peer.mark();
  const cmd = { agent_id: agentId, create_conversation: { body: {} } };
  if (tools) cmd.external_tools = tools;
  const res = await step(`${peer.name}: runtimeStart ${agentId}`, peer.client.runtimeStart(cmd));
  if (res?.success !== true) fail(`${peer.name}: runtimeStart ${agentId} answered ${JSON.stringify(res)}`);
  const conv = res.runtime.conversation_id;
  const at = peer.frames.indexOf(res);
  const end = await peer.wait(`update_queue after runtime_start for ${conv}`, (f) => f.type === 'update_queue' && convOf(f) === conv, at + 1);
  return { response: res, replay: peer.about(conv, at + 1, end), runtime: res.runtime, from };
}

// ask submits a user message and returns the input_accepted frame and the turn's frames (see
// untilStop).
async function ask(peer, runtime, text, extra = {}) {
  const from = peer.mark();
  const accepted = await step(
    `${peer.name}: submitInput`,
    peer.client.submitInput({
      runtime,
      payload: { kind: 'create_message', messages: [{ role: 'user', content: text }], ...extra },
    }),
  );
  if (accepted?.accepted !== true) fail(`${peer.name}: input was not accepted: ${JSON.stringify(accepted)}`);
  const frames = await peer.untilStop(runtime.conversation_id, from);
  return { accepted, frames };
}

// Handlers for controller-owned tools, by conversation; every request is recorded. It is async
// so that a handler that throws becomes a rejection, which the client sends as error.
const handlers = new Map();
const requests = [];
async function onToolCall(req) {
  requests.push({
    request_id: req.request_id,
    tool_name: req.tool_name,
    input: req.input,
    tool_call_id: req.tool_call_id,
    scope_id: req.scope_id,
    runtime: req.runtime,
  });
  const h = handlers.get(req.runtime?.conversation_id);
  if (!h) throw new Error(`no handler for conversation ${req.runtime?.conversation_id}`);
  return h(req);
}
function requestsFor(conv) {
  return requests.filter((r) => r.runtime?.conversation_id === conv);
}

// A controller-tool scenario: start agentId's runtime with the external tools, answer its
// calls with handler, run one turn.
async function toolTurn(peer, agentId, text, handler) {
  const st = await start(peer, agentId, externalTools);
  const conv = st.runtime.conversation_id;
  handlers.set(conv, handler);
  const turn = await ask(peer, st.runtime, text);
  return { start: { response: st.response, replay: st.replay }, ...turn, requests: requestsFor(conv) };
}

async function main() {
  // --- auth: the official client with a wrong secret cannot connect.
  {
    const bad = new Peer('bad-secret', 'hsk_not-a-secret');
    try {
      await bad.client.connect();
      summary.auth = { connected: true, frames: bad.frames };
    } catch (err) {
      summary.auth = { connected: false, error: String(err?.message ?? err), frames: bad.frames };
    }
    bad.client.close();
  }

  // --- a. connect and info.
  const ctl = await connect('controller');
  ctl.client.onExternalToolCall(onToolCall);
  summary.info = await step('info', ctl.client.info());

  // --- b. a controller-owned tool answered with text.
  summary.tool = await toolTurn(ctl, agents.tickets, 'Look up LET-123', () => ({
    content: [{ type: 'text', text: 'LET-123 is assigned to Support.' }],
  }));

  // --- c. the tool reports a failure (is_error).
  summary.isError = await toolTurn(ctl, agents.missing, 'Look up LET-404', () => ({
    is_error: true,
    content: [{ type: 'text', text: 'LET-404 was not found' }],
  }));

  // --- d. the controller cannot run the tool (the handler throws).
  summary.protocolError = await toolTurn(ctl, agents.outage, 'Look up LET-500', () => {
    throw new Error('ticket system unavailable');
  });

  // --- e. a scoped tool: invisible without its scope, called with it.
  {
    const st = await start(ctl, agents.dispatcher, externalTools);
    const conv = st.runtime.conversation_id;
    handlers.set(conv, (req) => ({ content: [{ type: 'text', text: `queued ${req.input?.task} as T-9` }] }));
    const plain = await ask(ctl, st.runtime, 'Restart the API');
    const plainRequests = requestsFor(conv);
    const selected = await ask(ctl, st.runtime, 'Restart the API, with dispatch', { external_tool_scope_ids: ['dispatch'] });
    summary.scoped = {
      start: { response: st.response, replay: st.replay },
      plain: { ...plain, requests: plainRequests },
      selected: { ...selected, requests: requestsFor(conv).slice(plainRequests.length) },
    };
  }

  // --- f. approvals: allow on one turn, deny with a message on the next.
  {
    const st = await start(ctl, agents.approver);
    const rt = st.runtime;
    const conv = rt.conversation_id;
    const approvalTurn = async (text, decision) => {
      const asked = await ask(ctl, rt, text);
      const cr = asked.frames.find((f) => f.type === 'control_request');
      if (!cr) fail(`approval (${decision.behavior}): no control_request before the stop_reason: ${brief(asked.frames)}`);
      const from = ctl.mark();
      const answered = await step(
        `approval (${decision.behavior}): submitInput approval_response`,
        ctl.client.submitInput({ runtime: rt, payload: { kind: 'approval_response', request_id: cr.request_id, decision } }),
      );
      if (answered?.accepted !== true) fail(`approval (${decision.behavior}) was not accepted: ${JSON.stringify(answered)}`);
      const after = await ctl.untilStop(conv, from);
      return { requested: asked, controlRequest: cr, answered, after };
    };
    summary.approve = await approvalTurn('Deploy it', { behavior: 'allow' });
    summary.deny = await approvalTurn('Deploy it again', { behavior: 'deny', message: 'not today' });
    summary.approvalStart = { response: st.response, replay: st.replay };
  }

  // --- g. abort a slow turn.
  {
    const st = await start(ctl, agents.slow);
    const rt = st.runtime;
    const conv = rt.conversation_id;
    const from = ctl.mark();
    const accepted = await step(
      'abort: submitInput',
      ctl.client.submitInput({ runtime: rt, payload: { kind: 'create_message', messages: [{ role: 'user', content: 'Take your time' }] } }),
    );
    if (accepted?.accepted !== true) fail(`abort: the input was not accepted: ${JSON.stringify(accepted)}`);
    const active = await ctl.wait(
      'update_loop_status with an active run',
      (f) => f.type === 'update_loop_status' && convOf(f) === conv && (f.loop_status?.active_run_ids?.length ?? 0) > 0,
      from,
    );
    const t0 = Date.now();
    const response = await step('abort()', ctl.client.abort({ runtime: rt }));
    const stopAt = await ctl.wait('stop_reason after the abort', (f) => isDelta(f, 'stop_reason') && convOf(f) === conv, from);
    const elapsedMs = ctl.times[stopAt] - t0;
    const frames = await ctl.untilStop(conv, from);
    const again = await step('a second abort()', ctl.client.abort({ runtime: rt }));
    summary.abort = {
      accepted,
      loopStatus: ctl.frames[active],
      response,
      elapsedMs,
      frames,
      again,
    };
  }

  // --- h. sync after a reconnect: A sees the turn's tool call and goes; B syncs and gets the
  // turn from its start (replayed from its log), then the rest live.
  {
    const { rt, conv, accepted, active, aSeen } = await leaveMidTurn('sync', 'client-a', agents.stepper, 'Answer slowly', 'tool_call_message');
    const b = await connect('client-b');
    const bFrom = b.mark();
    const response = await step('sync()', b.client.sync({ runtime: rt }));
    const at = b.frames.indexOf(response);
    const frames = await b.untilStop(conv, at + 1);
    summary.sync = {
      accepted,
      aLoopStatus: active,
      aSeen,
      response,
      replay: b.about(conv, bFrom, at - 1),
      after: frames,
    };
    b.client.close();
  }

  // --- i. abort a turn held for approval; the conversation takes a new message at once.
  {
    const st = await start(ctl, agents.approver);
    const rt = st.runtime;
    const conv = rt.conversation_id;
    const asked = await ask(ctl, rt, 'Deploy it');
    const from = ctl.mark();
    const response = await step('abort() a held turn', ctl.client.abort({ runtime: rt }));
    // The turn ended before the answer went out: its frames are already here.
    const frames = ctl.about(conv, from, ctl.frames.indexOf(response));
    const next = await ask(ctl, rt, 'Deploy it after all');
    summary.abortApproval = { asked, response, frames, next };
  }

  // --- j. abort a turn waiting for the controller's tool; the tool answers late.
  {
    const st = await start(ctl, agents.tickets, externalTools);
    const rt = st.runtime;
    const conv = rt.conversation_id;
    let release;
    const released = new Promise((resolve) => (release = resolve));
    let called;
    const request = new Promise((resolve) => (called = resolve));
    handlers.set(conv, async (req) => {
      called(req);
      await released;
      return { content: [{ type: 'text', text: 'LET-123 is assigned to Support.' }] };
    });
    const from = ctl.mark();
    const accepted = await step(
      'abortTool: submitInput',
      ctl.client.submitInput({ runtime: rt, payload: { kind: 'create_message', messages: [{ role: 'user', content: 'Look up LET-123' }] } }),
    );
    if (accepted?.accepted !== true) fail(`abortTool: the input was not accepted: ${JSON.stringify(accepted)}`);
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error(`no external tool call within ${STEP_MS} ms`)), STEP_MS).unref());
    await step('abortTool: the tool call', Promise.race([request, timeout]));
    const t0 = Date.now();
    const response = await step('abort() a turn waiting for its tool', ctl.client.abort({ runtime: rt }));
    const stopAt = await ctl.wait('stop_reason after the abort', (f) => isDelta(f, 'stop_reason') && convOf(f) === conv, from);
    const elapsedMs = ctl.times[stopAt] - t0;
    const frames = await ctl.untilStop(conv, from);
    const lateFrom = ctl.mark();
    release();
    const late = await ctl.wait('the answer to the late tool result', (f) => f.type === 'error', lateFrom);
    summary.abortTool = { accepted, response, elapsedMs, frames, late: ctl.frames[late], requests: requestsFor(conv) };
  }

  // --- k. a message sent while another runs waits on the runtime's queue.
  {
    const st = await start(ctl, agents.sluggish);
    const rt = st.runtime;
    const conv = rt.conversation_id;
    const from = ctl.mark();
    const submit = (text, id) =>
      step(
        `queue: submitInput ${id}`,
        ctl.client.submitInput({ runtime: rt, payload: { kind: 'create_message', messages: [{ role: 'user', content: text, client_message_id: id }] } }),
      );
    const first = await submit('Answer slowly', 'cm-first');
    await ctl.wait(
      'update_loop_status with an active run',
      (f) => f.type === 'update_loop_status' && convOf(f) === conv && (f.loop_status?.active_run_ids?.length ?? 0) > 0,
      from,
    );
    const second = await submit('Then answer again', 'cm-second');
    const firstStop = await ctl.wait('the first stop_reason', (f) => isDelta(f, 'stop_reason') && convOf(f) === conv, from);
    const frames = await ctl.untilStop(conv, firstStop + 1);
    summary.queue = { first, second, frames: ctl.about(conv, from, ctl.frames.indexOf(frames[frames.length - 1])) };
  }

  // --- l. a turn that ends while nobody is connected is replayed whole by the next sync, once.
  {
    const { rt, conv, active, aSeen } = await leaveMidTurn('syncEnded', 'client-a2', agents.brief, 'Answer while I am away', 'tool_return_message');
    const runId = active.loop_status.active_run_ids[0];
    const ended = await statusWhenFinal(runId);

    const b = await connect('client-b2');
    const bFrom = b.mark();
    const response = await step('syncEnded: sync()', b.client.sync({ runtime: rt }));
    const at = b.frames.indexOf(response);
    const again = await step('syncEnded: second sync()', b.client.sync({ runtime: rt }));
    const atAgain = b.frames.indexOf(again);
    summary.syncEnded = {
      aSeen,
      ended,
      response,
      replay: b.about(conv, bFrom, at - 1),
      again,
      replayAgain: b.about(conv, at + 1, atAgain - 1),
    };
    b.client.close();
  }

  // --- m. a turn whose model calls a subagent: its progress as update_subagent_state.
  {
    const st = await start(ctl, agents.delegator);
    summary.subagent = await ask(ctl, st.runtime, 'Delegate it');
  }

  // --- p. client_tool_allowlist: a turn whose allowlist leaves the agent's test_async out.
  {
    const st = await start(ctl, agents.approver);
    const turn = await ask(ctl, st.runtime, 'Deploy, with no tool allowed', { client_tool_allowlist: [] });
    summary.allowlist = { start: { response: st.response, replay: st.replay }, ...turn };
  }

  // --- n. end-user tokens on browser sockets, and conversationList().
  {
    const mint = async (endUser) => {
      const res = await fetch(`${baseUrl}/accounts/me/tokens`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ endUser, agents: [agents.delegatee] }),
      });
      const body = await res.json();
      if (res.status !== 201) fail(`minting a token for ${endUser}: ${res.status} ${JSON.stringify(body)}`);
      return body.token;
    };
    const user = async (name) => {
      const peer = await connect(name, undefined, await mint(name));
      const st = await start(peer, agents.delegatee);
      const turn = await ask(peer, st.runtime, `Hi, I am ${name}`);
      return { peer, runtime: st.runtime, turn };
    };
    const alice = await user('alice');
    const bob = await user('bob');
    const a = alice.peer.client;
    summary.tokens = {
      protocol: a.socket.protocol,
      createAgent: await step('alice: runtimeStart create_agent', a.runtimeStart({ create_agent: { body: { name: 'mine' } }, create_conversation: { body: {} } })),
      otherAgent: await step('alice: runtimeStart of another agent', a.runtimeStart({ agent_id: agents.tickets, create_conversation: { body: {} } })),
      bobsConversation: await step("alice: runtimeStart of bob's conversation", a.runtimeStart({ agent_id: agents.delegatee, conversation_id: bob.runtime.conversation_id })),
      alice: { runtime: alice.runtime, frames: alice.turn.frames, list: await step('alice: conversationList()', a.conversationList()) },
      bob: { runtime: bob.runtime, frames: bob.turn.frames, list: await step('bob: conversationList()', bob.peer.client.conversationList()) },
      all: await step('the secret: conversationList()', ctl.client.conversationList({ query: { agent_id: agents.delegatee } })),
      updateModel: await step('alice: update_model', answer(a, 'update_model', { runtime: alice.runtime, payload: { model_id: 'gpt-4.1-mini' } })),
    };
  }

  // --- o. list_models, update_model and update_toolset: a runtime switches its model, and its
  // next turn runs on the new one.
  {
    const st = await start(ctl, agents.switcher);
    const c = ctl.client;
    const list = await step('list_models', answer(c, 'list_models', {}));
    const before = await ask(ctl, st.runtime, 'Which model answers?');
    const update = await step('update_model', answer(c, 'update_model', { runtime: st.runtime, payload: { model_handle: 'openai/gpt-4.1-mini', reasoning_effort: 'high' } }));
    const after = await ask(ctl, st.runtime, 'And now?');
    const thinker = await start(ctl, agents.thinker);
    const thought = await ask(ctl, thinker.runtime, 'Hi');
    summary.models = {
      list,
      before,
      update,
      after,
      thought,
      toolset: await step('update_toolset auto', answer(c, 'update_toolset', { runtime: st.runtime, toolset_preference: 'auto' })),
      toolsetRefused: await step('update_toolset codex', answer(c, 'update_toolset', { runtime: st.runtime, toolset_preference: 'codex' })),
    };
  }

  // --- t. re-registration: a controller reconnects while its old socket is still open and
  // starts the same runtime with the same tools again; the next turn runs, its tool call asked
  // of one of them.
  {
    const first = await start(ctl, agents.tickets, externalTools);
    const rt = first.runtime;
    handlers.set(rt.conversation_id, () => ({ content: [{ type: 'text', text: 'LET-7 is closed.' }] }));
    const again = await connect('reconnected');
    again.client.onExternalToolCall(onToolCall);
    const from = again.mark();
    const res = await step(
      'reconnected: runtimeStart with the same tools',
      again.client.runtimeStart({ agent_id: rt.agent_id, conversation_id: rt.conversation_id, external_tools: externalTools }),
    );
    await again.wait('update_queue after the second runtime_start', (f) => f.type === 'update_queue' && convOf(f) === rt.conversation_id, from);
    const turn = await ask(again, rt, 'Look up LET-7');
    summary.reregistered = { start: res, ...turn, requests: requestsFor(rt.conversation_id) };
    again.client.close();
  }

  // --- s. files in create_message: a base64 image beside the text is kept as the conversation's
  // file; an image by URL is refused, and left out under image_failure_mode "drop".
  {
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
    const st = await start(ctl, agents.thinker);
    const withImage = [
      { type: 'text', text: 'What is in this picture?' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
    ];
    const byURL = [{ type: 'text', text: 'And this?' }, { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }];
    const sent = await ask(ctl, st.runtime, undefined, { messages: [{ role: 'user', content: withImage }] });
    const refused = await step(
      'submitInput with an image by URL',
      ctl.client.submitInput({ runtime: st.runtime, payload: { kind: 'create_message', messages: [{ role: 'user', content: byURL }] } }),
    );
    const dropped = await ask(ctl, st.runtime, undefined, { messages: [{ role: 'user', content: byURL }], image_failure_mode: 'drop' });
    summary.files = { conversation: st.runtime.conversation_id, sent, refused, dropped };
  }

  // --- r. providers: the account's own keys, connected and disconnected through request().
  {
    const c = ctl.client;
    const cmd = (type, body) => step(type, answer(c, type, { target: 'local', ...body }));
    summary.providers = {
      before: await cmd('list_connect_providers', {}),
      connected: await cmd('connect_provider', { provider_id: 'openai', fields: { apiKey: 'sk-conformance', baseUrl: 'https://proxy.example/v1' } }),
      listed: await cmd('list_connect_providers', {}),
      noKey: await cmd('connect_provider', { provider_id: 'anthropic', fields: {} }),
      bedrock: await cmd('connect_provider', { provider_id: 'bedrock', fields: { apiKey: 'x' } }),
      disconnected: await cmd('disconnect_provider', { provider_id: 'openai' }),
      again: await cmd('disconnect_provider', { provider_id: 'openai' }),
    };
  }

  // --- q. memory: the rememberer's memory files and their commits, through request().
  {
    const c = ctl.client;
    const mem = (type, body) => step(type, answer(c, type, { agent_id: agents.rememberer, ...body }));
    const path = 'system/persona.md';
    const first = await mem('write_memory_file', { path, content: 'I am terse.\nI like tea.\n' });
    const second = await mem('write_memory_file', { path, content: 'I am terse.\nI like coffee.\n' });
    summary.memory = {
      first,
      second,
      list: await mem('list_memory', {}),
      read: await mem('read_memory_file', { path }),
      history: await mem('memory_history', { file_path: path }),
      diff: await mem('memory_commit_diff', { sha: second.commit_sha }),
      atRef: await mem('memory_file_at_ref', { file_path: path, ref: first.commit_sha }),
      escape: await mem('read_memory_file', { path: '../other/x.md' }),
      deleted: await mem('delete_memory_file', { path }),
      deletedAgain: await mem('delete_memory_file', { path }),
    };
  }
}

// answer sends a command the client has no method for with its generic request(), and resolves
// with its <type>_response.
function answer(client, type, body) {
  return client.request(type, body, { predicate: (m) => m.type === `${type}_response` });
}

// leaveMidTurn connects a client, starts agentId's runtime, sends text and closes the client once
// the turn is running and it has seen a delta of kind seen. It returns what the client saw.
async function leaveMidTurn(what, name, agentId, text, seen) {
  const a = await connect(name);
  const st = await start(a, agentId);
  const rt = st.runtime;
  const conv = rt.conversation_id;
  const from = a.mark();
  const accepted = await step(
    `${what}: ${name} submitInput`,
    a.client.submitInput({ runtime: rt, payload: { kind: 'create_message', messages: [{ role: 'user', content: text }] } }),
  );
  if (accepted?.accepted !== true) fail(`${what}: ${name}'s input was not accepted: ${JSON.stringify(accepted)}`);
  const active = await a.wait(
    `update_loop_status with an active run on ${name}`,
    (f) => f.type === 'update_loop_status' && convOf(f) === conv && (f.loop_status?.active_run_ids?.length ?? 0) > 0,
    from,
  );
  await a.wait(`the ${seen} on ${name}`, (f) => isDelta(f, seen) && convOf(f) === conv, from);
  const aSeen = a.about(conv, from);
  a.client.close();
  return { rt, conv, accepted, active: a.frames[active], aSeen };
}

// statusWhenFinal polls the harness's GET /status/{eventId} until the turn is over, and returns
// the last answer.
async function statusWhenFinal(eventId) {
  const deadline = Date.now() + STEP_MS;
  for (;;) {
    const res = await fetch(`${baseUrl}/status/${eventId}`, { headers: { authorization: `Bearer ${secret}` } });
    const body = await res.json();
    if (res.ok && ['completed', 'failed', 'cancelled'].includes(body.status)) return body;
    if (Date.now() > deadline) fail(`status of ${eventId} still ${res.status} ${JSON.stringify(body)} after ${STEP_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

main().then(
  () => finish(0),
  (err) => {
    if (!(err instanceof Stop)) stop(err?.stack ?? String(err));
  },
);
