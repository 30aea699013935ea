// The chat: the AI SDK's useChat over the harness's /chat route with the end user's token, as
// any AI SDK front end talks to it, with tool approval, stopping, resuming after a reload, and
// POST /async.

import { useEffect, useId, useMemo, useRef, useState } from 'react';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { errorText } from './api.jsx';

// Transport is the AI SDK's DefaultChatTransport that also says when a resume found no turn
// to follow (the stream route's 204).
class Transport extends DefaultChatTransport {
  constructor(options, onNothingToResume) {
    super(options);
    this.onNothingToResume = onNothingToResume;
  }

  async reconnectToStream(options) {
    const stream = await super.reconnectToStream(options);
    if (!stream) this.onNothingToResume();
    return stream;
  }
}

// Chat is one conversation: restored is what it starts from (the messages read back, whether
// to resume its latest turn, and the whole list to show should there be nothing to resume).
// listed says whether the server has the conversation yet.
export function Chat({ session, agentId, conversationId, restored, listed, onTurnEnd, onAsync }) {
  const whole = useRef(null);
  const transport = useMemo(
    () =>
      new Transport(
        { api: '/chat', headers: session.headers, fetch: session.fetch, body: { agentId } },
        () => restored.whole && whole.current?.(restored.whole),
      ),
    [session, agentId, restored],
  );
  const { messages, setMessages, sendMessage, status, error, stop, addToolApprovalResponse } = useChat({
    id: conversationId,
    messages: restored.messages,
    transport,
    // Only a conversation the server has can be resumed: the stream route answers a token
    // 404 for one it does not know yet.
    resume: restored.resume,
    // Once every approval of the message is answered, the answers go to the harness.
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    // A turn that ended may have made the conversation, or changed its preview.
    onFinish: () => onTurnEnd(),
  });
  whole.current = setMessages;
  // The browser test reads the list useChat holds, to compare it with the one read back after
  // a reload.
  useEffect(() => {
    window.playgroundChat = { conversationId, status, messages };
  }, [conversationId, status, messages]);
  const [draft, setDraft] = useState('');
  const messageId = useId();
  const [problem, setProblem] = useState('');
  const busy = status === 'submitted' || status === 'streaming';

  function send() {
    const text = draft.trim();
    if (!text || busy) return;
    setProblem('');
    sendMessage({ text });
    setDraft('');
  }

  async function sendAsync() {
    const text = draft.trim();
    if (!text) return;
    setProblem('');
    try {
      // A token's /async turn continues a conversation of its end user, or starts one under an
      // id the harness makes: it may not name one the harness does not have yet.
      const id = listed ? { id: conversationId } : {};
      onAsync(await session.call('POST', '/async', { agentId, ...id, message: text }));
      setDraft('');
    } catch (err) {
      setProblem(`POST /async refused the message: ${err.message}`);
    }
  }

  // stopTurn asks the harness to stop the turn first: closing the local stream alone would
  // leave it running on the server.
  async function stopTurn() {
    try {
      await session.call('POST', `/chat/${encodeURIComponent(conversationId)}/stop`);
    } catch (err) {
      setProblem(`Could not stop the turn: ${err.message}`);
    } finally {
      stop();
    }
  }

  function onKeyDown(e) {
    // Enter sends, Shift+Enter breaks the line; an input method composing text keeps Enter.
    if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      send();
    }
  }

  return (
    <section aria-label="Chat" className="chat">
      <ol aria-label="Messages" className="messages">
        {messages.map(m => (
          <Message key={m.id} message={m} onApproval={addToolApprovalResponse} />
        ))}
      </ol>
      <p aria-live="polite" className="status">Status: {status}</p>
      {error && <p role="alert" className="error">{errorText(error)}</p>}
      {problem && <p role="alert" className="error">{problem}</p>}
      <form
        className="composer"
        onSubmit={e => {
          e.preventDefault();
          send();
        }}
      >
        {/* Labelled by id, not wrapped: React keeps a controlled textarea's value as its
            text, which would become part of a wrapping label's text. */}
        <div className="field">
          <label htmlFor={messageId}>Message</label>
          <textarea id={messageId} value={draft} onChange={e => setDraft(e.target.value)} onKeyDown={onKeyDown} rows={3} />
        </div>
        <div className="actions">
          <button type="submit" disabled={busy}>Send</button>
          {busy && <button type="button" className="danger" onClick={stopTurn}>Stop</button>}
          <button type="button" className="secondary" disabled={busy} onClick={sendAsync}>Send as /async</button>
        </div>
      </form>
    </section>
  );
}

function Message({ message, onApproval }) {
  // The finish chunk's messageMetadata carries the turn's usage.
  const usage = message.metadata?.usage;
  return (
    <li data-role={message.role}>
      <p className="role">{message.role}</p>
      {message.parts.map((part, i) => (
        <Part key={part.toolCallId ?? part.id ?? i} part={part} onApproval={onApproval} />
      ))}
      {message.role === 'assistant' && usage && (
        <p className="usage">Tokens: {usage.inputTokens} in, {usage.outputTokens} out</p>
      )}
    </li>
  );
}

function Part({ part, onApproval }) {
  if (part.type === 'text' || part.type === 'reasoning') {
    return <p className={part.type}>{part.text}</p>;
  }
  if (part.type.startsWith('tool-') || part.type === 'dynamic-tool') {
    return <ToolPart part={part} onApproval={onApproval} />;
  }
  const data = part.data ?? {};
  switch (part.type) {
    case 'data-async-result':
      return (
        <article aria-label={`Async result ${data.toolName}`} className="card">
          <p className="card-title">Async result {data.toolName}: {data.status}</p>
          <Json label="Response" value={data.error ?? data.response} />
        </article>
      );
    case 'data-subagent':
      return (
        <article aria-label={`Subagent ${data.agent}`} className="card">
          <p className="card-title">Subagent {data.agent}: {data.state}{data.status ? ` (${data.status})` : ''}</p>
          {data.text && <p>{data.text}</p>}
        </article>
      );
    case 'data-prompt-tool':
      return (
        <article aria-label={`Prompt tool ${data.prompt}`} className="card">
          <p className="card-title">Prompt tool {data.prompt}: {data.state}, step {data.step}</p>
          {data.text && <p>{data.text}</p>}
          {data.error && <p>Error: {data.error}</p>}
        </article>
      );
    case 'data-tool-progress':
      return (
        <p className="note">
          Progress of {data.toolName}: {data.progress}{data.total ? ` of ${data.total}` : ''}{data.message ? `, ${data.message}` : ''}
        </p>
      );
    case 'data-warning':
      return <p className="note">Warning: {data.message}</p>;
    case 'source-url':
      return (
        <p className="note">
          Source: <a href={part.url} rel="noreferrer" target="_blank">{part.title || part.url}</a>
        </p>
      );
    case 'file':
      return <p className="note">File: {part.filename || part.mediaType}</p>;
  }
  // step-start and whatever else the stream may carry need no words.
  return null;
}

function ToolPart({ part, onApproval }) {
  const name = part.type === 'dynamic-tool' ? part.toolName : part.type.slice('tool-'.length);
  return (
    <article aria-label={`Tool ${name}`} className="card">
      <p className="card-title">Tool {name}: <span className="state">{part.state}</span></p>
      {part.input !== undefined && <Json label="Input" value={part.input} />}
      {part.output !== undefined && <Json label="Output" value={part.output} />}
      {part.errorText && <p>Error: {part.errorText}</p>}
      {part.approval?.reason && <p>Reason: {part.approval.reason}</p>}
      {part.state === 'approval-requested' && (
        <div className="actions">
          <button type="button" onClick={() => onApproval({ id: part.approval.id, approved: true })}>Approve</button>
          <button
            type="button"
            className="danger"
            onClick={() => onApproval({ id: part.approval.id, approved: false, reason: 'denied in the playground' })}
          >
            Deny
          </button>
        </div>
      )}
    </article>
  );
}

function Json({ label, value }) {
  if (value === undefined) return null;
  return (
    <>
      <p className="label">{label}</p>
      <pre>{typeof value === 'string' ? value : JSON.stringify(value, null, 2)}</pre>
    </>
  );
}
