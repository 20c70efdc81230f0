// My tokens: the caller's sessions and API tokens, live, expired or revoked (for the
// record); a new named API token with its expiry, shown once; revoking one. The users page
// shows a user's tokens with the same table.

import { html, useState } from '../vendor/htm-preact-standalone.module.js';
import { del, get, post } from '../lib/api.js';
import { Time } from '../lib/format.js';
import { HelpLink } from '../lib/help.js';
import { label, t } from '../lib/i18n.js';
import { ConfirmButton, ErrorNote, Field, PagedFooter, useLoad, useNotice } from '../lib/ui.js';

const SHOWN = 50;
const DEFAULT_DAYS = 90;

// LIVE, EXPIRED or REVOKED.
export function tokenState(token, now = Date.now()) {
  if (token.revoked_at_ms !== null && token.revoked_at_ms !== undefined) return 'REVOKED';
  if (token.expires_at_ms <= now) return 'EXPIRED';
  return 'LIVE';
}

// A list the API gives whole, shown `step` items at a time, in PagedFooter's shape.
export function useShown(load, step = SHOWN) {
  const [count, setCount] = useState(step);
  const items = load.value ?? [];
  return {
    items: items.slice(0, count),
    next: items.length > count ? String(count) : null,
    loading: load.loading && !load.value,
    error: load.error,
    more: () => setCount(count + step),
  };
}

// Newest first.
export function newestFirst(tokens) {
  return [...(tokens ?? [])].sort((a, b) => b.created_at_ms - a.created_at_ms || b.id - a.id);
}

// Tokens with their state; a live one has a revoke button when `onRevoke` is given.
export function TokenTable({ id, tokens, onRevoke }) {
  const now = Date.now();
  return html`
    <div class="table-wrap">
      <table class="list" id=${id}>
        <thead><tr>
          <th>${t('tokens.id')}</th><th>${t('tokens.kind')}</th><th>${t('tokens.name')}</th>
          <th>${t('tokens.created')}</th><th>${t('tokens.expires')}</th><th>${t('tokens.state')}</th>
          ${onRevoke && html`<th>${t('common.actions')}</th>`}
        </tr></thead>
        <tbody>${tokens.map((token) => html`<${TokenRow} key=${token.id} token=${token} state=${tokenState(token, now)}
          onRevoke=${onRevoke} />`)}</tbody>
      </table>
    </div>
  `;
}

function TokenRow({ token, state, onRevoke }) {
  return html`
    <tr data-token=${token.id} data-state=${state}>
      <td>${token.id}</td>
      <td>${label('token_kind', token.kind)}</td>
      <td>${token.name || html`<span class="muted">—</span>`}</td>
      <td><${Time} ms=${token.created_at_ms} /></td>
      <td><${Time} ms=${token.expires_at_ms} /></td>
      <td>
        <span class=${`badge ${state === 'LIVE' ? 'state-live' : 'state-gone'}`}>${label('token_state', state)}</span>
        ${state === 'REVOKED' && html` <small class="muted"><${Time} ms=${token.revoked_at_ms} /></small>`}
      </td>
      ${onRevoke && html`
        <td class="actions">
          ${state === 'LIVE' && html`<span data-action="revoke">
            <${ConfirmButton} danger label=${t('tokens.revoke')}
              question=${token.kind === 'SESSION' ? t('tokens.revoke_session_question') : t('tokens.revoke_question', { name: token.name })}
              onConfirm=${() => onRevoke(token)} /></span>`}
        </td>`}
    </tr>
  `;
}

export function TokensPage() {
  const tokens = useLoad(() => get('/api/tokens').then(newestFirst), []);
  const [onlyLive, setOnlyLive] = useState(false);
  const [creating, setCreating] = useState(false);
  const [issued, setIssued] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useNotice();

  const filtered = {
    ...tokens,
    value: tokens.value && (onlyLive ? tokens.value.filter((token) => tokenState(token) === 'LIVE') : tokens.value),
  };
  const shown = useShown(filtered);

  const revoke = async (token) => {
    setError(null);
    try {
      await del(`/api/tokens/${token.id}`);
      setNotice(t('tokens.revoked', { id: token.id }));
      tokens.reload();
    } catch (failure) {
      setError(failure);
    }
  };

  return html`
    <section class="page">
      <header class="page-head">
        <h1>${t('tokens.title')} <${HelpLink} page="tokens" /></h1>
        ${!creating && !issued && html`<button type="button" id="new-token" onClick=${() => setCreating(true)}>${t('tokens.new')}</button>`}
      </header>
      <p class="muted">${t('tokens.intro')}</p>
      ${notice}
      ${creating && html`<${NewTokenForm} onClose=${() => setCreating(false)}
        onIssued=${(answer) => { setCreating(false); setIssued(answer); tokens.reload(); }} />`}
      ${issued && html`<${IssuedToken} issued=${issued} onDone=${() => setIssued(null)} />`}
      <div class="filters">
        <label class="inline"><input type="checkbox" id="tokens-only-live" checked=${onlyLive}
          onChange=${(event) => setOnlyLive(event.target.checked)} /> ${t('tokens.only_live')}</label>
      </div>
      <${ErrorNote} error=${error} />
      <${TokenTable} id="tokens-table" tokens=${shown.items} onRevoke=${revoke} />
      <${PagedFooter} paged=${shown} />
    </section>
  `;
}

function NewTokenForm({ onIssued, onClose }) {
  const [name, setName] = useState('');
  const [days, setDays] = useState(String(DEFAULT_DAYS));
  const [errors, setErrors] = useState({});
  const [failure, setFailure] = useState(null);
  const [saving, setSaving] = useState(false);

  const submit = async (event) => {
    event.preventDefault();
    setFailure(null);
    const found = {};
    const trimmed = name.trim();
    const count = Number(days);
    if (!trimmed || trimmed.length > 100) found.name = t('tokens.name_invalid');
    if (!Number.isInteger(count) || count < 1) found.days = t('tokens.days_invalid');
    setErrors(found);
    if (Object.keys(found).length) return;
    setSaving(true);
    try {
      onIssued(await post('/api/tokens', { name: trimmed, expires_in_days: count }));
    } catch (error) {
      const message = error.message ?? '';
      if (error.status === 400 && /^name/.test(message)) setErrors({ name: message });
      else if (error.status === 400 && /expires_in_days/.test(message)) setErrors({ days: message });
      else setFailure(error);
    } finally {
      setSaving(false);
    }
  };

  return html`
    <form class="panel" id="token-form" onSubmit=${submit} novalidate aria-labelledby="token-form-title"
      onKeyDown=${(event) => event.key === 'Escape' && onClose()}>
      <h2 id="token-form-title">${t('tokens.new_title')}</h2>
      <${Field} id="token-name" label=${t('tokens.name')} hint=${t('tokens.name_hint')} error=${errors.name}>${(d) => html`
        <input id="token-name" required maxlength="100" autocomplete="off" aria-describedby=${d} value=${name}
          onInput=${(event) => setName(event.target.value)} />`}<//>
      <${Field} id="token-days" label=${t('tokens.days')} hint=${t('tokens.days_hint')} error=${errors.days}>${(d) => html`
        <input id="token-days" type="number" min="1" step="1" required aria-describedby=${d} value=${days}
          onInput=${(event) => setDays(event.target.value)} />`}<//>
      <${ErrorNote} error=${failure} />
      <div class="buttons">
        <button type="submit" id="token-create" disabled=${saving}>${t('tokens.create')}</button>
        <button type="button" class="secondary" onClick=${onClose}>${t('common.cancel')}</button>
      </div>
    </form>
  `;
}

// The new token, this once, with a way to copy it.
function IssuedToken({ issued, onDone }) {
  const [copied, setCopied] = useState(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(issued.token);
      setCopied(true);
    } catch {
      document.getElementById('token-value')?.select();
      setCopied(false);
    }
  };
  return html`
    <div class="panel" id="token-issued" role="region" aria-labelledby="token-issued-title">
      <h2 id="token-issued-title">${t('tokens.issued_title')}</h2>
      <p class="notice" role="status">${t('tokens.issued_note')}</p>
      <${Field} id="token-value" label=${t('tokens.token')} hint=${t('tokens.issued_usage')} wide>${(d) => html`
        <input id="token-value" class="code" readonly size="70" aria-describedby=${d} value=${issued.token}
          onFocus=${(event) => event.target.select()} />`}<//>
      <p class="muted">${t('tokens.expires_at')} <${Time} ms=${issued.expires_at_ms} /></p>
      <div class="buttons">
        <button type="button" id="token-copy" onClick=${copy}>${t('tokens.copy')}</button>
        <button type="button" class="secondary" id="token-done" onClick=${onDone}>${t('tokens.done')}</button>
        ${copied === true && html`<span role="status">${t('tokens.copied')}</span>`}
        ${copied === false && html`<span role="status">${t('tokens.copy_by_hand')}</span>`}
      </div>
    </div>
  `;
}
