// The harness API on this page's own origin, and what the page keeps in sessionStorage.

// ApiError is a refused request: its status, the harness's message and the field it named.
export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

// request sends one JSON request with the account secret and returns the parsed answer.
export async function request(secret, method, path, body) {
  const headers = { Authorization: `Bearer ${secret}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON (a proxy's error page, say): the text itself is the message.
  }
  if (!res.ok) throw new ApiError(res.status, data?.error ?? (text || res.statusText), data?.field);
  return data;
}

// withField puts the field a refusal names before its message, unless the message starts
// with it already, as the harness's config errors do.
export function withField(field, message) {
  return field && !message.startsWith(field) ? `${field}: ${message}` : message;
}

// errorText turns an error into what the user reads. The AI SDK's transport throws the
// response body as the message, which for the harness is JSON {"error": …}.
export function errorText(err) {
  if (!err) return '';
  try {
    const data = JSON.parse(err.message);
    if (data?.error) return withField(data.field, data.error);
  } catch {
    // A plain message.
  }
  return err.message || String(err);
}

// Session state lives in sessionStorage only: it goes with the tab, and the secret is never
// written anywhere that outlives it.
const prefix = 'harness.';

export const session = {
  get: key => sessionStorage.getItem(prefix + key),
  set(key, value) {
    if (value == null) sessionStorage.removeItem(prefix + key);
    else sessionStorage.setItem(prefix + key, value);
  },
  conversations(agentId) {
    try {
      return JSON.parse(session.get(`conversations.${agentId}`)) ?? [];
    } catch {
      return [];
    }
  },
  setConversations(agentId, ids) {
    session.set(`conversations.${agentId}`, JSON.stringify(ids));
  },
  // messages are a conversation's messages up to its last user message. The reply to that
  // message is left out: GET /chat/{id}/stream replays the latest turn whole, running or
  // ended, so keeping the reply as well would show it twice after a reload.
  messages(conversationId) {
    try {
      const messages = JSON.parse(session.get(`messages.${conversationId}`)) ?? [];
      return messages.slice(0, messages.findLastIndex(m => m.role === 'user') + 1);
    } catch {
      return [];
    }
  },
  setMessages(conversationId, messages) {
    try {
      session.set(`messages.${conversationId}`, JSON.stringify(messages));
    } catch {
      // Over the storage quota: a reload shows less history, nothing worse.
    }
  },
  clear() {
    for (const key of Object.keys(sessionStorage)) {
      if (key.startsWith(prefix)) sessionStorage.removeItem(key);
    }
  },
};

// newConversationId makes an id in the harness's id grammar. getRandomValues, unlike
// randomUUID, also works on plain http from another host.
export function newConversationId() {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `conv_${Array.from(bytes, b => b.toString(16).padStart(2, '0')).join('')}`;
}
