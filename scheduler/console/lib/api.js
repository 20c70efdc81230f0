// The API client: every call goes to this node's HTTP API with the session cookie. Writes
// carry X-Requested-With, without which the API refuses a cookie-authenticated write (a
// request another site made the browser send), and bodies go as JSON; the login
// (POST /api/auth/session) needs both too, so that no other site can sign the browser in.
// Errors become ApiError with the API's message and, for a bad field, its name.

export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field ?? null;
  }
}

// Called when the session has ended (401): the shell shows the login again.
let onSessionEnded = () => {};
export function whenSessionEnds(callback) {
  onSessionEnded = callback;
}

export function withQuery(path, query) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== '') params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET') headers['X-Requested-With'] = 'kadence-console';
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    throw new ApiError(0, error.message);
  }
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = new ApiError(response.status, data?.error ?? response.statusText, data?.field);
    const isLogin = path.startsWith('/api/auth/session');
    if (response.status === 401 && !isLogin) onSessionEnded(error);
    throw error;
  }
  return data;
}

export const get = (path, query) => api('GET', withQuery(path, query));
export const post = (path, body) => api('POST', path, body ?? {});
export const put = (path, body) => api('PUT', path, body);
export const patch = (path, body) => api('PATCH', path, body);
export const del = (path) => api('DELETE', path);
