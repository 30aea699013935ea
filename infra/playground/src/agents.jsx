// An agent's page (its conversations, the chat, the async panel) and the agent editor.

import { useEffect, useId, useState } from 'react';
import { newConversationId, session, withField } from './api.jsx';
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

export function AgentView({ agent, secret, onEdit }) {
  const { agentId } = agent;
  const [conversations, setConversations] = useState(() => session.conversations(agentId));
  // After a reload the kept conversation reopens (and useChat resumes its running turn).
  const [current, setCurrent] = useState(() => {
    const kept = session.get('conversation');
    return conversations.includes(kept) ? kept : conversations[0];
  });
  const [asyncEvent, setAsyncEvent] = useState(null);

  // startConversation makes a new conversation current and lists it first.
  function startConversation() {
    const id = newConversationId();
    const ids = [id, ...session.conversations(agentId)];
    session.setConversations(agentId, ids);
    setConversations(ids);
    setCurrent(id);
  }
  // The current conversation is kept for a reload; an agent without conversations gets one,
  // so there is always a chat to type in.
  useEffect(() => {
    if (current) session.set('conversation', current);
    else startConversation();
  }, [current]);
  if (!current) return null;

  return (
    <>
      <h2>{agent.config?.name || agentId}</h2>
      <p className="meta">Agent id <code>{agentId}</code></p>
      <div className="actions">
        <button type="button" onClick={onEdit}>Edit agent</button>
        <button type="button" onClick={startConversation}>New conversation</button>
      </div>
      <nav aria-label="Conversations" className="conversations">
        <ul>
          {conversations.map(id => (
            <li key={id}>
              <button type="button" aria-current={id === current ? 'true' : undefined} onClick={() => setCurrent(id)}>
                {id}
              </button>
            </li>
          ))}
        </ul>
      </nav>
      <Chat key={current} secret={secret} agentId={agentId} conversationId={current} onAsync={setAsyncEvent} />
      <AsyncPanel secret={secret} event={asyncEvent} />
    </>
  );
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
