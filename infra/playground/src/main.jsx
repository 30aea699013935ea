// The playground: sign in with an account secret, pick or write an agent, and talk to it
// through the AI SDK's useChat, as any AI SDK front end would.

import { useCallback, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { request, session } from './api.jsx';
import { AgentEditor, AgentView } from './agents.jsx';
import './app.css';

function App() {
  const [secret, setSecret] = useState(() => session.get('secret'));
  const [refused, setRefused] = useState('');

  function signIn(value) {
    session.set('secret', value);
    setRefused('');
    setSecret(value);
  }
  // signOut forgets everything the tab kept; a reason says why the user has to sign in again.
  const signOut = useCallback(reason => {
    session.clear();
    setRefused(typeof reason === 'string' ? reason : '');
    setSecret(null);
  }, []);

  if (!secret) return <SignIn onSignIn={signIn} refused={refused} />;
  return <Workspace secret={secret} onSignOut={signOut} />;
}

function SignIn({ onSignIn, refused }) {
  const [value, setValue] = useState('');
  const [problem, setProblem] = useState(refused);
  const [busy, setBusy] = useState(false);

  // The secret is tried on the agents list before it is kept, so a wrong one never sticks.
  async function submit(e) {
    e.preventDefault();
    setBusy(true);
    try {
      await request(value.trim(), 'GET', '/accounts/me/agents');
      onSignIn(value.trim());
    } catch (err) {
      setProblem(err.status === 401 ? 'The harness refused this secret.' : `Could not sign in: ${err.message}`);
      setBusy(false);
    }
  }

  return (
    <main className="signin">
      <h1>Harness playground</h1>
      <form onSubmit={submit}>
        <label>
          Account secret
          <input
            type="password"
            autoComplete="off"
            required
            value={value}
            onChange={e => setValue(e.target.value)}
            aria-invalid={problem ? true : undefined}
          />
        </label>
        <button type="submit" disabled={busy}>Sign in</button>
      </form>
      {problem && <p role="alert" className="error">{problem}</p>}
      <p className="hint">The secret stays in this tab's session storage and is sent only to this server.</p>
    </main>
  );
}

function Workspace({ secret, onSignOut }) {
  const [agents, setAgents] = useState(null);
  const [selected, setSelected] = useState(() => session.get('agent'));
  // editing is null, 'new', or the agent whose config is open in the editor.
  const [editing, setEditing] = useState(null);
  const [problem, setProblem] = useState('');

  // call runs a request; a 401 means the secret no longer works, so the user signs in again.
  const call = useCallback(async (method, path, body) => {
    try {
      return await request(secret, method, path, body);
    } catch (err) {
      if (err.status === 401) onSignOut('The harness no longer accepts this secret: sign in again.');
      throw err;
    }
  }, [secret, onSignOut]);

  const load = useCallback(async () => {
    try {
      const { agents } = await call('GET', '/accounts/me/agents');
      setAgents(agents ?? []);
      setProblem('');
    } catch (err) {
      setProblem(`Could not list the agents: ${err.message}`);
    }
  }, [call]);
  useEffect(() => {
    load();
  }, [load]);

  function select(agentId) {
    session.set('agent', agentId);
    setSelected(agentId);
    setEditing(null);
  }
  // edit reads the agent afresh, so the editor starts from the stored config.
  async function edit(agentId) {
    try {
      setEditing(await call('GET', `/accounts/me/agents/${encodeURIComponent(agentId)}`));
    } catch (err) {
      setProblem(`Could not read agent ${agentId}: ${err.message}`);
    }
  }
  async function saved(agent) {
    await load();
    select(agent.agentId);
  }

  const agent = agents?.find(a => a.agentId === selected);
  let content;
  if (editing) {
    content = (
      <AgentEditor
        key={editing === 'new' ? 'new' : editing.agentId}
        agent={editing === 'new' ? null : editing}
        call={call}
        onSaved={saved}
        onCancel={() => setEditing(null)}
      />
    );
  } else if (agent) {
    content = <AgentView key={agent.agentId} agent={agent} secret={secret} onEdit={() => edit(agent.agentId)} />;
  } else {
    content = <p>{agents ? 'Pick an agent, or make a new one.' : 'Loading the agents…'}</p>;
  }

  return (
    <div className="app">
      <header>
        <h1>Harness playground</h1>
        <button type="button" onClick={() => onSignOut()}>Sign out</button>
      </header>
      <nav aria-label="Agents" className="agents">
        <ul>
          {(agents ?? []).map(a => (
            <li key={a.agentId}>
              <button
                type="button"
                aria-current={a.agentId === selected && !editing ? 'true' : undefined}
                onClick={() => select(a.agentId)}
              >
                {a.agentId}
              </button>
            </li>
          ))}
        </ul>
        <button type="button" className="secondary" onClick={() => setEditing('new')}>New agent</button>
      </nav>
      <main>
        {problem && <p role="alert" className="error">{problem}</p>}
        {content}
      </main>
    </div>
  );
}

createRoot(document.getElementById('root')).render(<App />);
