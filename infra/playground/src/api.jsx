// The harness API on this page's own origin, the signed-in Session, and what the page keeps in
// sessionStorage.

// ApiError is a refused request: its status, the harness's message, the field it named and,
// for a refused token, why ("expired", "invalid").
export class ApiError extends Error {
  constructor(status, message, field, reason) {
    super(message);
    this.status = status;
    this.field = field;
    this.reason = reason;
  }
}

// jsonInit is the fetch init of a JSON request with a bearer credential.
function jsonInit(credential, method, body) {
  const headers = { Authorization: `Bearer ${credential}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  return { method, headers, body: body === undefined ? undefined : JSON.stringify(body) };
}

// answer returns a response's parsed JSON, or throws the ApiError it says.
async function answer(res) {
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON (a proxy's error page, say): the text itself is the message.
  }
  if (!res.ok) throw new ApiError(res.status, data?.error ?? (text || res.statusText), data?.field, data?.reason);
  return data;
}

// request sends one JSON request with a bearer credential and returns the parsed answer.
export async function request(credential, method, path, body) {
  return answer(await fetch(path, jsonInit(credential, method, body)));
}

// renewAt is how far into a token's life it is replaced.
const renewAt = 0.8;
// retryRenewal is how long a renewal that failed for want of the network waits to try again.
const retryRenewal = 30_000;

// Session is a signed-in tab: the account secret, held in this object's memory only, mints
// tokens for one end user and opens the account routes (the agent editor's); everything else,
// the chat routes and the agents list, goes with the end user's token, which is minted anew
// before it expires. onLost says why the tab has to sign in again.
export class Session {
  #secret;
  #timer = 0;
  #renewing = null;
  #onLost;

  constructor(secret, endUser, onLost) {
    this.#secret = secret;
    this.endUser = endUser;
    this.#onLost = onLost;
    this.token = '';
  }

  // open signs in: the secret's first token, or the ApiError the harness refused it with.
  static async open(secret, endUser, onLost) {
    const s = new Session(secret, endUser, onLost);
    await s.#mint();
    return s;
  }

  async #mint() {
    const { token, expiresAt } = await request(this.#secret, 'POST', '/accounts/me/tokens', { endUser: this.endUser });
    if (!this.#secret) return; // signed out meanwhile
    this.token = token;
    this.#schedule((Date.parse(expiresAt) - Date.now()) * renewAt);
  }

  #schedule(ms) {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.renew().catch(err => {
        if (err.status === undefined) this.#schedule(retryRenewal);
      });
    }, Math.max(ms, 1000));
  }

  // renew mints the next token; calls made meanwhile share the one mint.
  renew() {
    this.#renewing ??= this.#mint()
      .catch(err => {
        if (err.status === 401) this.#lost('The harness no longer accepts this secret: sign in again.');
        throw err;
      })
      .finally(() => {
        this.#renewing = null;
      });
    return this.#renewing;
  }

  #lost(reason) {
    this.close();
    this.#onLost(reason);
  }

  // headers are the token's, for the AI SDK's transport.
  headers = () => ({ Authorization: `Bearer ${this.token}` });

  // fetch is fetch for the routes the token opens: a request the harness refuses because the
  // token expired (a tab asleep past the renewal, say) is sent once more with a new token.
  fetch = async (input, init = {}) => {
    let res = await fetch(input, init);
    if (res.status === 401 && (await refusedAs(res)) === 'expired' && this.#secret) {
      await this.renew();
      const headers = new Headers(init.headers);
      headers.set('Authorization', `Bearer ${this.token}`);
      res = await fetch(input, { ...init, headers });
    }
    if (res.status === 401 && this.#secret) this.#lost('The harness refused the end-user token: sign in again.');
    return res;
  };

  // call sends a JSON request with the token (a chat route, /agents, /conversations…).
  call = async (method, path, body) => answer(await this.fetch(path, jsonInit(this.token, method, body)));

  // account sends a JSON request with the secret, for the account routes only (/accounts/me/…).
  account = async (method, path, body) => {
    try {
      return await request(this.#secret, method, path, body);
    } catch (err) {
      if (err.status === 401) this.#lost('The harness no longer accepts this secret: sign in again.');
      throw err;
    }
  };

  // close forgets the secret and the token and stops the renewals.
  close() {
    clearTimeout(this.#timer);
    this.#secret = '';
    this.token = '';
  }
}

// refusedAs reads the reason of a refusal without using up the response's body.
async function refusedAs(res) {
  try {
    return (await res.clone().json())?.reason;
  } catch {
    return undefined;
  }
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

// tab is what the page keeps in sessionStorage, which goes with the tab: the end-user name and
// the agent and conversation open, so that a reload reopens them once signed in again. Never
// the secret or a token.
const prefix = 'harness.';

export const tab = {
  get: key => sessionStorage.getItem(prefix + key),
  set(key, value) {
    if (value == null) sessionStorage.removeItem(prefix + key);
    else sessionStorage.setItem(prefix + key, value);
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
