// The playground: sign in with an account secret as an end user, pick or write an agent, and
// talk to it through the AI SDK's useChat, as any AI SDK front end would, on an end-user token.

import { useCallback, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { Session, tab, withField } from './api.jsx';
import { AgentEditor, AgentView } from './agents.jsx';
import './app.css';

function App() {
  // The session lives in this component's memory only: a reload signs the tab out.
  const [session, setSession] = useState(null);
  const [refused, setRefused] = useState('');

  function signIn(s) {
    tab.set('endUser', s.endUser);
    setRefused('');
    setSession(s);
  }
  // signOut forgets the session; a reason says why the user has to sign in again (the
  // end-user name, agent and conversation stay for that), none that the user chose to leave.
  const signOut = useCallback(reason => {
    setSession(s => {
      s?.close();
      return null;
    });
    if (typeof reason === 'string') setRefused(reason);
    else {
      tab.clear();
      setRefused('');
    }
  }, []);

  if (!session) return <SignIn onSignIn={signIn} onLost={signOut} refused={refused} />;
  return <Workspace session={session} onSignOut={signOut} />;
}

function SignIn({ onSignIn, onLost, refused }) {
  const [secret, setSecret] = useState('');
  const [endUser, setEndUser] = useState(() => tab.get('endUser') ?? '');
  const [problem, setProblem] = useState(refused ? { message: refused } : null);
  const [busy, setBusy] = useState(false);

  // Signing in mints the end user's first token, so a wrong secret or name never gets in.
  async function submit(e) {
    e.preventDefault();
    setBusy(true);
    try {
      onSignIn(await Session.open(secret.trim(), endUser.trim(), onLost));
    } catch (err) {
      let message = `Could not sign in: ${err.message}`;
      if (err.status === 401) message = 'The harness refused this secret.';
      else if (err.field) message = withField(err.field, err.message);
      setProblem({ message, field: err.field });
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
            value={secret}
            onChange={e => setSecret(e.target.value)}
            aria-invalid={(problem && problem.field !== 'endUser') || undefined}
          />
        </label>
        <label>
          End-user name
          <input
            autoComplete="off"
            spellCheck={false}
            required
            value={endUser}
            onChange={e => setEndUser(e.target.value)}
            aria-invalid={problem?.field === 'endUser' || undefined}
          />
        </label>
        <button type="submit" disabled={busy}>Sign in</button>
      </form>
      {problem && <p role="alert" className="error">{problem.message}</p>}
      <p className="hint">
        The playground chats as this end user, with an end-user token the secret mints. The secret stays in
        this tab's memory only, to mint tokens and edit agents: a reload asks for it again.
      </p>
    </main>
  );
}

function Workspace({ session, onSignOut }) {
  const [agents, setAgents] = useState(null);
  const [selected, setSelected] = useState(() => tab.get('agent'));
  // editing is null, 'new', or the agent whose config is open in the editor.
  const [editing, setEditing] = useState(null);
  const [problem, setProblem] = useState('');

  // The agents listed are those the end user's token may use (GET /agents).
  const load = useCallback(async () => {
    try {
      const { agents } = await session.call('GET', '/agents');
      setAgents(agents ?? []);
      setProblem('');
    } catch (err) {
      setProblem(`Could not list the agents: ${err.message}`);
    }
  }, [session]);
  useEffect(() => {
    load();
  }, [load]);

  function select(agentId) {
    tab.set('agent', agentId);
    setSelected(agentId);
    setEditing(null);
  }
  // edit reads the agent's config afresh, an account route, so the editor starts from what is stored.
  async function edit(agentId) {
    try {
      setEditing(await session.account('GET', `/accounts/me/agents/${encodeURIComponent(agentId)}`));
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
        call={session.account}
        onSaved={saved}
        onCancel={() => setEditing(null)}
      />
    );
  } else if (agent) {
    content = <AgentView key={agent.agentId} agent={agent} session={session} onEdit={() => edit(agent.agentId)} />;
  } else {
    content = <p>{agents ? 'Pick an agent, or make a new one.' : 'Loading the agents…'}</p>;
  }

  return (
    <div className="app">
      <header>
        <h1>Harness playground</h1>
        <div className="who">
          <p>End user <strong>{session.endUser}</strong></p>
          <button type="button" onClick={() => onSignOut()}>Sign out</button>
        </div>
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
