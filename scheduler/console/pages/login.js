// The login: name and password, traded for the session cookie (POST /api/auth/session).

import { html, useState } from '../vendor/htm-preact-standalone.module.js';
import { api } from '../lib/api.js';
import { LOCALES, locale, t } from '../lib/i18n.js';
import { ErrorNote } from '../lib/ui.js';

export function LoginPage({ onLogin, onLocale }) {
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const session = await api('POST', '/api/auth/session', { name, password });
      await onLogin(session.user);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return html`
    <main class="login">
      <form onSubmit=${submit} aria-labelledby="login-title">
        <h1 id="login-title">${t('login.title')}</h1>
        <label for="login-name">${t('login.name')}</label>
        <input id="login-name" name="name" autocomplete="username" required value=${name}
          onInput=${(event) => setName(event.target.value)} />
        <label for="login-password">${t('login.password')}</label>
        <input id="login-password" name="password" type="password" autocomplete="current-password" required
          value=${password} onInput=${(event) => setPassword(event.target.value)} />
        ${error && html`<${ErrorNote} error=${error.status === 401 ? { message: t('login.wrong') } : error} />`}
        <button type="submit" id="login-submit" disabled=${busy}>${t('login.submit')}</button>
        <a href="#/reset-password" id="login-reset">${t('login.reset_link')}</a>
        <label class="language">
          <span>${t('nav.language')}</span>
          <select id="login-language" value=${locale()} onChange=${(event) => onLocale(event.target.value)}>
            ${LOCALES.map((code) => html`<option value=${code}>${t(`language.${code}`)}</option>`)}
          </select>
        </label>
      </form>
    </main>
  `;
}
