// An agent's page (the end user's conversations with it, the chat, the async panel) and the
// agent editor.

import { useCallback, useEffect, useId, useRef, useState } from 'react';
import { newConversationId, tab, withField } from './api.jsx';
import { Chat } from './chat.jsx';
import { AsyncPanel } from './async.jsx';

// A new agent starts from a scripted model, which needs no credentials, so it runs at once.
const template = {
  name: 'My agent',
  system: 'You are a concise assistant. When asked about the time, call current_time.',
  model: {
    provider: 'scripted',
    script: [
      { text: 'Let me check the clock. ', toolCalls: [{ name: 'current_time', input: {} }] },
      { text: 'It is {{toolResults}} (UTC).' },
    ],
  },
  tools: { current_time: { enabled: true } },
};

// pageSize is how many conversations a page of the list shows; maxListed is the most a
// refresh reads again (GET /conversations's largest page).
const pageSize = 20;
const maxListed = 100;

export function AgentView({ agent, session, onEdit }) {
  const { agentId } = agent;
  // list is the end user's conversations with the agent as GET /conversations lists them,
  // newest first, with the cursor of the next page; null until read.
  const [list, setList] = useState(null);
  const [next, setNext] = useState('');
  // current is the conversation open, and opened what its chat starts from (null while it is
  // read back).
  const [current, setCurrent] = useState(null);
  const [opened, setOpened] = useState(null);
  const wanted = useRef(null);
  const [asyncEvent, setAsyncEvent] = useState(null);
  const [problem, setProblem] = useState('');

  const listPath = `/conversations?agentId=${encodeURIComponent(agentId)}`;
  // shown is how many conversations the list has grown to with "More conversations".
  const shown = useRef(pageSize);
  // refresh reads the list again, as far as it was shown: a turn ended, a title changed.
  const refresh = useCallback(async () => {
    try {
      const page = await session.call('GET', `${listPath}&limit=${shown.current}`);
      setList(page.conversations);
      setNext(page.nextCursor ?? '');
      return page.conversations;
    } catch (err) {
      setProblem(`Could not list the conversations: ${err.message}`);
      return null;
    }
  }, [session, listPath]);

  async function more() {
    try {
      const page = await session.call('GET', `${listPath}&limit=${pageSize}&cursor=${encodeURIComponent(next)}`);
      setList(l => {
        const grown = [...l, ...page.conversations.filter(c => !l.some(k => k.id === c.id))];
        shown.current = Math.min(grown.length, maxListed);
        return grown;
      });
      setNext(page.nextCursor ?? '');
    } catch (err) {
      setProblem(`Could not list more conversations: ${err.message}`);
    }
  }

  // open makes a conversation current: one the server listed is read back whole first, a new
  // one starts empty. It is kept for a reload.
  const open = useCallback(async (id, listed) => {
    wanted.current = id;
    tab.set('conversation', id);
    setCurrent(id);
    setOpened(null);
    setProblem('');
    if (!listed) {
      setOpened({ id, messages: [], resume: false });
      return;
    }
    try {
      const messages = await readMessages(session, id);
      if (wanted.current === id) setOpened({ id, ...restore(messages) });
    } catch (err) {
      if (wanted.current === id) setProblem(`Could not read the conversation back: ${err.message}`);
    }
  }, [session]);

  // The conversation kept for a reload reopens, else the newest; an agent without
  // conversations gets a new one, so there is always a chat to type in. A conversation the user
  // opened while the list was read stays open.
  useEffect(() => {
    (async () => {
      const conversations = await refresh();
      if (!conversations || wanted.current) return;
      const kept = conversations.find(c => c.id === tab.get('conversation')) ?? conversations[0];
      open(kept?.id ?? newConversationId(), Boolean(kept));
    })();
  }, [refresh, open]);

  async function rename(title) {
    await session.call('PATCH', `/conversations/${encodeURIComponent(current)}`, { title });
    await refresh();
  }
  async function remove() {
    try {
      await session.call('DELETE', `/conversations/${encodeURIComponent(current)}`);
    } catch (err) {
      setProblem(`Could not delete the conversation: ${err.message}`);
      return;
    }
    const conversations = (await refresh()) ?? [];
    open(conversations[0]?.id ?? newConversationId(), conversations.length > 0);
  }

  const info = list?.find(c => c.id === current);
  return (
    <>
      <h2>{agent.name || agentId}</h2>
      <p className="meta">Agent id <code>{agentId}</code></p>
      {agent.description && <p>{agent.description}</p>}
      <div className="actions">
        <button type="button" onClick={onEdit}>Edit agent</button>
        <button type="button" onClick={() => open(newConversationId(), false)}>New conversation</button>
      </div>
      <nav aria-label="Conversations" className="conversations">
        <ul>
          {current && list && !info && (
            <li>
              <button type="button" aria-current="true">Not started yet</button>
            </li>
          )}
          {(list ?? []).map(c => (
            <li key={c.id}>
              <button type="button" aria-current={c.id === current ? 'true' : undefined} onClick={() => open(c.id, true)}>
                {titleOf(c)}
              </button>
            </li>
          ))}
        </ul>
        {next && <button type="button" className="secondary" onClick={more}>More conversations</button>}
      </nav>
      {problem && <p role="alert" className="error">{problem}</p>}
      {current && <ConversationHeader key={`header ${current}`} id={current} info={info} onRename={rename} onDelete={remove} />}
      {opened ? (
        <Chat
          key={opened.id}
          session={session}
          agentId={agentId}
          conversationId={opened.id}
          restored={opened}
          listed={Boolean(info)}
          onTurnEnd={refresh}
          onAsync={setAsyncEvent}
        />
      ) : (
        current && !problem && <p>Reading the conversation back…</p>
      )}
      <AsyncPanel session={session} event={asyncEvent} onSettled={refresh} />
    </>
  );
}

function titleOf(c) {
  return c.title || 'Untitled conversation';
}

// ConversationHeader names the open conversation and, once the server has it, renames and
// deletes it.
function ConversationHeader({ id, info, onRename, onDelete }) {
  const [renaming, setRenaming] = useState(false);
  const [title, setTitle] = useState('');
  const [problem, setProblem] = useState(null);
  const [busy, setBusy] = useState(false);

  async function save(e) {
    e.preventDefault();
    setBusy(true);
    try {
      await onRename(title.trim());
      setRenaming(false);
      setProblem(null);
    } catch (err) {
      setProblem(withField(err.field, err.message));
    } finally {
      setBusy(false);
    }
  }
  function remove() {
    if (window.confirm(`Delete the conversation "${titleOf(info)}"? Its messages are deleted for good.`)) onDelete();
  }

  return (
    <div className="conversation">
      <h3>{info ? titleOf(info) : 'New conversation'}</h3>
      <p className="meta">Conversation <code>{id}</code></p>
      {info && !renaming && (
        <div className="actions">
          <button
            type="button"
            className="secondary"
            onClick={() => {
              setTitle(info.title);
              setRenaming(true);
            }}
          >
            Rename
          </button>
          <button type="button" className="danger" onClick={remove}>Delete conversation</button>
        </div>
      )}
      {info && renaming && (
        <form onSubmit={save}>
          <label>
            Title
            <input value={title} onChange={e => setTitle(e.target.value)} required autoComplete="off" aria-invalid={problem ? true : undefined} />
          </label>
          {problem && <p role="alert" className="error">{problem}</p>}
          <div className="actions">
            <button type="submit" disabled={busy}>Save title</button>
            <button type="button" className="secondary" onClick={() => setRenaming(false)}>Cancel</button>
          </div>
        </form>
      )}
    </div>
  );
}

// readMessages reads a conversation back whole, a page after another: the UIMessage list its
// useChat client held.
async function readMessages(session, id) {
  const messages = [];
  let cursor = '';
  do {
    const query = cursor ? `?limit=500&cursor=${encodeURIComponent(cursor)}` : '?limit=500';
    const page = await session.call('GET', `/conversations/${encodeURIComponent(id)}/messages${query}`);
    messages.push(...page.messages);
    cursor = page.nextCursor ?? '';
  } while (cursor);
  return messages;
}

// restore is what the chat of a conversation read back starts from. A latest turn that looks
// unfinished (its user message is the last message, or its last step's calls went out and no
// step followed) is resumed at GET /chat/{id}/stream, which replays the turn from its start as
// a new assistant message: the chat then starts from the messages before that turn's reply, or
// the reply would show twice, and falls back to the whole list when there is nothing to resume.
// Any other conversation is shown as read, and not resumed.
function restore(messages) {
  const last = messages.at(-1);
  let unfinished = last?.role === 'user';
  if (last?.role === 'assistant') {
    const step = last.parts.slice(last.parts.findLastIndex(p => p.type === 'step-start') + 1);
    const calls = step.filter(p => p.type.startsWith('tool-') || p.type === 'dynamic-tool');
    unfinished = calls.length > 0 && !calls.some(p => p.state === 'approval-requested');
  }
  if (!unfinished) return { messages, resume: false };
  return { messages: messages.slice(0, messages.findLastIndex(m => m.role === 'user') + 1), resume: true, whole: messages };
}

export function AgentEditor({ agent, call, onSaved, onCancel }) {
  const [agentId, setAgentId] = useState('');
  const [text, setText] = useState(() => JSON.stringify(agent ? agent.config : template, null, 2));
  const [problem, setProblem] = useState(null);
  const [busy, setBusy] = useState(false);
  const hintId = useId();
  const configId = useId();

  async function save(e) {
    e.preventDefault();
    let config;
    try {
      config = JSON.parse(text);
    } catch (err) {
      setProblem({ message: `The config is not valid JSON: ${err.message}` });
      return;
    }
    if (!isObject(config)) {
      setProblem({ message: 'The config must be a JSON object.' });
      return;
    }
    setBusy(true);
    try {
      const saved = agent
        ? await call('PATCH', `/accounts/me/agents/${encodeURIComponent(agent.agentId)}`, mergePatch(agent.config, config))
        : await call('POST', '/accounts/me/agents', agentId.trim() ? { agentId: agentId.trim(), ...config } : config);
      onSaved(saved);
    } catch (err) {
      setProblem({ message: withField(err.field, err.message), field: err.field });
      setBusy(false);
    }
  }

  const idInvalid = problem?.field === 'agentId';
  return (
    <form className="editor" onSubmit={save}>
      <h2>{agent ? `Edit agent ${agent.agentId}` : 'New agent'}</h2>
      {!agent && (
        <>
          <label>
            Agent id
            <input
              value={agentId}
              onChange={e => setAgentId(e.target.value)}
              autoComplete="off"
              spellCheck={false}
              aria-describedby={hintId}
              aria-invalid={idInvalid || undefined}
            />
          </label>
          <p id={hintId} className="hint">Letters, digits, _ - . or :; leave it empty to let the harness pick one.</p>
        </>
      )}
      {/* Labelled by id, not wrapped: a textarea's text would become part of the label's. */}
      <div className="field">
        <label htmlFor={configId}>Agent config (JSON)</label>
        <textarea
          id={configId}
          value={text}
          onChange={e => setText(e.target.value)}
          rows={18}
          spellCheck={false}
          aria-invalid={(problem && !idInvalid) || undefined}
        />
      </div>
      {problem && <p role="alert" className="error">{problem.message}</p>}
      <div className="actions">
        <button type="submit" disabled={busy}>Save agent</button>
        <button type="button" className="secondary" onClick={onCancel}>Cancel</button>
      </div>
    </form>
  );
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// mergePatch returns the JSON merge patch (RFC 7396) that turns before into after. PATCH
// takes a merge patch, so sending the edited config alone would keep the keys the user
// deleted; they go as null. Unchanged values, "[redacted]" secrets among them, are left out.
function mergePatch(before, after) {
  const patch = {};
  for (const key of Object.keys(before)) {
    if (!(key in after)) patch[key] = null;
  }
  for (const [key, value] of Object.entries(after)) {
    if (isObject(before[key]) && isObject(value)) {
      const inner = mergePatch(before[key], value);
      if (Object.keys(inner).length > 0) patch[key] = inner;
    } else if (JSON.stringify(before[key]) !== JSON.stringify(value)) {
      patch[key] = value;
    }
  }
  return patch;
}
