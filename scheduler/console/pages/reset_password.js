// Setting a password with a one-time reset token (POST /api/auth/password-reset): what a user
// an import created does first, and what an admin hands a user who forgot theirs. Shown
// without a session at #/reset-password (?token= fills the token in).

import { html, useState } from '../vendor/htm-preact-standalone.module.js';
import { api } from '../lib/api.js';
import { t } from '../lib/i18n.js';
import { ErrorNote } from '../lib/ui.js';

export function ResetPasswordPage({ query }) {
  const [token, setToken] = useState(query?.token ?? '');
  const [password, setPassword] = useState('');
  const [repeat, setRepeat] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    if (password !== repeat) {
      setError({ message: t('reset.mismatch') });
      return;
    }
    setBusy(true);
    try {
      await api('POST', '/api/auth/password-reset', { token: token.trim(), password });
      setDone(true);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  if (done) {
    return html`
      <main class="login">
        <section aria-labelledby="reset-title">
          <h1 id="reset-title">${t('reset.title')}</h1>
          <p id="reset-done" role="status">${t('reset.done')}</p>
          <a href="#/" id="reset-login">${t('reset.to_login')}</a>
        </section>
      </main>
    `;
  }
  return html`
    <main class="login">
      <form onSubmit=${submit} aria-labelledby="reset-title">
        <h1 id="reset-title">${t('reset.title')}</h1>
        <p class="muted">${t('reset.intro')}</p>
        <label for="reset-token">${t('reset.token')}</label>
        <input id="reset-token" name="token" autocomplete="off" required value=${token}
          onInput=${(event) => setToken(event.target.value)} />
        <label for="reset-password">${t('reset.password')}</label>
        <input id="reset-password" name="password" type="password" autocomplete="new-password" required
          minlength="10" value=${password} onInput=${(event) => setPassword(event.target.value)} />
        <label for="reset-repeat">${t('reset.repeat')}</label>
        <input id="reset-repeat" name="repeat" type="password" autocomplete="new-password" required
          value=${repeat} onInput=${(event) => setRepeat(event.target.value)} />
        ${error && html`<${ErrorNote} error=${error} />`}
        <button type="submit" id="reset-submit" disabled=${busy}>${t('reset.submit')}</button>
        <a href="#/" id="reset-back">${t('reset.to_login')}</a>
      </form>
    </main>
  `;
}
