// The async panel: a turn sent with POST /async, read back at GET /status/{eventId}.

import { useCallback, useEffect, useState } from 'react';

// A turn is polled while it is processing, once a second for at most this many times.
const pollLimit = 30;

// onSettled is called when a turn followed here has left "processing".
export function AsyncPanel({ session, event, onSettled }) {
  const [eventId, setEventId] = useState('');
  const [result, setResult] = useState(null);
  const [problem, setProblem] = useState('');

  const check = useCallback(async id => {
    try {
      const r = await session.call('GET', `/status/${encodeURIComponent(id)}`);
      setResult(r);
      setProblem('');
      return r;
    } catch (err) {
      setResult(null);
      setProblem(`GET /status/${id}: ${err.message}`);
      return null;
    }
  }, [session]);

  // A turn just sent is followed until it leaves "processing".
  useEffect(() => {
    if (!event) return;
    setEventId(event.eventId);
    setResult(event);
    let cancelled = false;
    (async () => {
      for (let i = 0; i < pollLimit && !cancelled; i++) {
        const r = await check(event.eventId);
        if (cancelled) return;
        if (r?.status !== 'processing') {
          if (r) onSettled();
          return;
        }
        await new Promise(resolve => setTimeout(resolve, 1000));
      }
    })();
    return () => {
      cancelled = true;
    };
  }, [event, check, onSettled]);

  return (
    <section aria-label="Async turns" className="async">
      <h3>Async turns</h3>
      <form
        onSubmit={e => {
          e.preventDefault();
          if (eventId.trim()) check(eventId.trim());
        }}
      >
        <label>
          Event id
          <input value={eventId} onChange={e => setEventId(e.target.value)} autoComplete="off" spellCheck={false} />
        </label>
        <div className="actions">
          <button type="submit">Check status</button>
        </div>
      </form>
      {problem && <p role="alert" className="error">{problem}</p>}
      {result && <Status result={result} />}
    </section>
  );
}

function Status({ result }) {
  const pending = [
    result.pendingApprovals?.length && `${result.pendingApprovals.length} approvals pending`,
    result.pendingAsyncTools?.length && `${result.pendingAsyncTools.length} async tools pending`,
  ].filter(Boolean);
  return (
    <div className="card">
      {/* "Event status", not "Status", so it is never mistaken for the chat's status line. */}
      <p aria-live="polite">Event status: {result.status}</p>
      <p className="meta">Event <code>{result.eventId}</code> in conversation <code>{result.conversationId}</code></p>
      {pending.length > 0 && <p>{pending.join(', ')}</p>}
      {result.usage && <p className="usage">Tokens: {result.usage.inputTokens} in, {result.usage.outputTokens} out</p>}
      {result.error && <p>Error: {result.error}</p>}
      {result.text && <p>Answer: {result.text}</p>}
      {result.messages && (
        <ol aria-label="Stored messages" className="messages">
          {result.messages.map((m, i) => (
            <li key={m.id ?? i} data-role={m.role}>
              <p className="role">{m.role}</p>
              <p>{messageText(m)}</p>
            </li>
          ))}
        </ol>
      )}
    </div>
  );
}

// messageText is a stored message's text, or what its parts are when it has none (a step
// of tool calls, say).
function messageText(m) {
  const parts = m.parts ?? [];
  const text = parts.filter(p => p.type === 'text').map(p => p.text).join('');
  return text || parts.map(p => (p.toolName ? `${p.type} ${p.toolName}` : p.type)).join(', ');
}
