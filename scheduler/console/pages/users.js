// Users (admins only, XXL-JOB's 用户管理): every user with their role, status and grants;
// creating one; and for the user chosen (`#/users?user=ann`): their role and status (demote
// or promote, disable or enable, delete), their grants per app (give, change, take back), a
// new password (which ends their other sessions), and their tokens. An admin's own role and
// status have no controls: the API refuses them (another admin must), as it refuses to
// demote, disable or delete the last enabled admin, which the page shows as the API says it.

import { html, useState } from '../vendor/htm-preact-standalone.module.js';
import { del, get, post, put } from '../lib/api.js';
import { visibleApps } from '../lib/apps.js';
import { Time } from '../lib/format.js';
import { HelpLink } from '../lib/help.js';
import { label, t } from '../lib/i18n.js';
import { currentUser, isAdmin } from '../lib/session.js';
import { Badge, ConfirmButton, ErrorNote, Field, PagedFooter, Select, useLoad, useNotice } from '../lib/ui.js';
import { TokenTable, newestFirst, useShown } from './tokens.js';

const ROLES = ['MEMBER', 'ADMIN'];
const ACCESS = ['VIEW', 'OPERATE', 'SCRIPTS'];
const NAME = /^[A-Za-z0-9._@-]{1,64}$/;
const MIN_PASSWORD = 10;

const userPath = (name) => `/api/users/${encodeURIComponent(name)}`;
const statusOf = (user) => (user.disabled_at_ms == null ? 'ENABLED' : 'DISABLED');

export function UsersPage({ query }) {
  const users = useLoad(() => get('/api/users'), []);
  const shown = useShown(users, 100);
  const [creating, setCreating] = useState(false);
  const [notice, setNotice] = useNotice();

  if (!isAdmin()) {
    return html`<section class="page"><h1>${t('users.title')}</h1><p class="error">${t('users.admins_only')}</p></section>`;
  }
  const selected = query.user ? (users.value ?? []).find((user) => user.name === query.user) : null;

  const deleted = (name) => {
    setNotice(t('users.deleted', { name }));
    users.reload();
    window.location.hash = '#/users';
  };

  const created = (user) => {
    setCreating(false);
    setNotice(t('users.created', { name: user.name }));
    users.reload();
    window.location.hash = `#/users?user=${encodeURIComponent(user.name)}`;
  };

  return html`
    <section class="page">
      <header class="page-head">
        <h1>${t('users.title')} <${HelpLink} page="users" /></h1>
        ${!creating && html`<button type="button" id="new-user" onClick=${() => setCreating(true)}>${t('users.new')}</button>`}
      </header>
      ${notice}
      ${creating && html`<${NewUserForm} onCreated=${created} onClose=${() => setCreating(false)} />`}
      ${query.user && !selected && users.value && html`<p class="error" role="alert">${t('users.no_such_user', { name: query.user })}</p>`}
      ${selected && html`<${UserPanel} key=${selected.name} user=${selected} onChanged=${users.reload}
        onDeleted=${deleted} setNotice=${setNotice} />`}
      <div class="table-wrap">
        <table class="list" id="users-table">
          <thead><tr>
            <th>${t('users.name')}</th><th>${t('users.role')}</th><th>${t('users.status')}</th><th>${t('users.grants')}</th>
            <th>${t('users.created_at')}</th><th>${t('common.actions')}</th>
          </tr></thead>
          <tbody>${shown.items.map((user) => html`<${UserRow} key=${user.name} user=${user}
            selected=${selected?.name === user.name} />`)}</tbody>
        </table>
      </div>
      <${PagedFooter} paged=${shown} />
    </section>
  `;
}

function Grants({ user }) {
  if (user.role === 'ADMIN') return html`<span class="muted">${t('users.all_apps')}</span>`;
  if (user.grants.length === 0) return html`<span class="muted">${t('users.no_grants')}</span>`;
  return user.grants.map((grant, index) => html`${index > 0 && ', '}<code>${grant.app}</code> ${label('access', grant.access)}`);
}

function UserRow({ user, selected }) {
  const name = encodeURIComponent(user.name);
  return html`
    <tr data-user=${user.name} aria-current=${selected ? 'true' : undefined}>
      <td>${user.name}${user.name === currentUser()?.name && html` <span class="muted">${t('users.you')}</span>`}</td>
      <td>${label('role', user.role)}</td>
      <td><${Badge} kind="user_status" value=${statusOf(user)} /></td>
      <td><${Grants} user=${user} /></td>
      <td><${Time} ms=${user.created_at_ms} /></td>
      <td class="actions">
        <a href=${`#/users?user=${name}`} data-action="manage">${t('users.manage')}</a>
        <a href=${`#/audit?user=${name}`}>${t('users.audit')}</a>
      </td>
    </tr>
  `;
}

function NewUserForm({ onCreated, onClose }) {
  const [form, setForm] = useState({ name: '', password: '', role: 'MEMBER' });
  const [errors, setErrors] = useState({});
  const [failure, setFailure] = useState(null);
  const [saving, setSaving] = useState(false);
  const set = (name) => (value) => setForm((previous) => ({ ...previous, [name]: value }));

  const submit = async (event) => {
    event.preventDefault();
    setFailure(null);
    const found = {};
    if (!NAME.test(form.name)) found.name = t('users.name_invalid');
    if (form.password.length < MIN_PASSWORD) found.password = t('users.password_short', { min: MIN_PASSWORD });
    setErrors(found);
    if (Object.keys(found).length) return;
    setSaving(true);
    try {
      onCreated(await post('/api/users', form));
    } catch (error) {
      const message = error.message ?? '';
      if (error.field && error.field in form) setErrors({ [error.field]: message });
      else if (error.status === 400 && /user name/.test(message)) setErrors({ name: message });
      else if (error.status === 409) setErrors({ name: message });
      else if (error.status === 400 && /password/.test(message)) setErrors({ password: message });
      else if (error.status === 400 && /role/i.test(message)) setErrors({ role: message });
      else setFailure(error);
    } finally {
      setSaving(false);
    }
  };

  return html`
    <form class="panel" id="user-form" onSubmit=${submit} novalidate aria-labelledby="user-form-title"
      onKeyDown=${(event) => event.key === 'Escape' && onClose()}>
      <h2 id="user-form-title">${t('users.new_title')}</h2>
      <${Field} id="user-name" label=${t('users.name')} hint=${t('users.name_hint')} error=${errors.name}>${(d) => html`
        <input id="user-name" required maxlength="64" autocomplete="off" spellcheck=${false} aria-describedby=${d}
          value=${form.name} onInput=${(event) => set('name')(event.target.value)} />`}<//>
      <${Field} id="user-password" label=${t('users.password')} hint=${t('users.password_hint', { min: MIN_PASSWORD })}
        error=${errors.password}>${(d) => html`
        <input id="user-password" type="password" required minlength=${MIN_PASSWORD} autocomplete="new-password"
          aria-describedby=${d} value=${form.password} onInput=${(event) => set('password')(event.target.value)} />`}<//>
      <${Field} id="user-role" label=${t('users.role')} hint=${t('users.role_hint')} error=${errors.role}>${(d) => html`
        <${Select} id="user-role" describedBy=${d} value=${form.role} values=${ROLES} kind="role" onChange=${set('role')} />`}<//>
      <${ErrorNote} error=${failure} />
      <div class="buttons">
        <button type="submit" id="user-save" disabled=${saving}>${t('users.create')}</button>
        <button type="button" class="secondary" onClick=${onClose}>${t('common.cancel')}</button>
      </div>
    </form>
  `;
}

// One user's role and status, grants, password and tokens.
function UserPanel({ user, onChanged, onDeleted, setNotice }) {
  return html`
    <section class="panel" id="user-panel" data-user=${user.name} aria-labelledby="user-panel-title">
      <header class="page-head">
        <h2 id="user-panel-title">${t('users.panel_title', { name: user.name })}</h2>
        <a class="button secondary" href="#/users" id="user-panel-close">${t('common.close')}</a>
      </header>
      <p class="muted">${label('role', user.role)} · ${t('users.created_at')} <${Time} ms=${user.created_at_ms} />
        ${user.disabled_at_ms != null && html` · ${t('users.disabled_since')} <${Time} ms=${user.disabled_at_ms} />`}</p>
      <${StandingSection} user=${user} onChanged=${onChanged} onDeleted=${onDeleted} setNotice=${setNotice} />
      <${GrantsSection} user=${user} onChanged=${onChanged} setNotice=${setNotice} />
      <${PasswordSection} user=${user} setNotice=${setNotice} />
      <${TokensSection} user=${user} setNotice=${setNotice} />
    </section>
  `;
}

// The user's role and status, and deleting them; none of it for the admin's own account.
function StandingSection({ user, onChanged, onDeleted, setNotice }) {
  const [role, setRole] = useState(user.role);
  const [failure, setFailure] = useState(null);
  const [saving, setSaving] = useState(false);
  const own = user.name === currentUser()?.name;
  const disabled = statusOf(user) === 'DISABLED';

  const act = async (request, notice) => {
    setFailure(null);
    setSaving(true);
    try {
      await request();
      setNotice(notice);
      onChanged();
    } catch (error) {
      setFailure(error);
    } finally {
      setSaving(false);
    }
  };
  const changeRole = (event) => {
    event.preventDefault();
    act(() => put(`${userPath(user.name)}/role`, { role }),
      t('users.role_changed', { name: user.name, role: label('role', role) }));
  };
  const setStatus = (status, notice) => act(() => put(`${userPath(user.name)}/status`, { status }), notice);
  const remove = async () => {
    setFailure(null);
    try {
      await del(userPath(user.name));
      onDeleted(user.name);
    } catch (error) {
      setFailure(error);
    }
  };

  return html`
    <section aria-labelledby="standing-title">
      <h3 id="standing-title">${t('users.standing')}</h3>
      ${own ? html`<p class="muted">${t('users.own_account')}</p>` : html`
        <form class="filters" id="role-form" onSubmit=${changeRole} novalidate>
          <${Field} id="standing-role" label=${t('users.role')} hint=${t('users.role_note')}>${(d) => html`
            <${Select} id="standing-role" describedBy=${d} value=${role} values=${ROLES} kind="role" onChange=${setRole} />`}<//>
          <button type="submit" id="role-save" data-action="set-role" disabled=${saving || role === user.role}>
            ${t('users.change_role')}</button>
        </form>
        <div class="buttons">
          ${disabled
            ? html`<button type="button" id="user-enable" data-action="enable" disabled=${saving}
                onClick=${() => setStatus('ENABLED', t('users.enabled', { name: user.name }))}>${t('users.enable')}</button>`
            : html`<span data-action="disable"><${ConfirmButton} id="user-disable" danger label=${t('users.disable')}
                question=${t('users.disable_question', { name: user.name })}
                onConfirm=${() => setStatus('DISABLED', t('users.disabled', { name: user.name }))} /></span>`}
          <span data-action="delete-user"><${ConfirmButton} id="user-delete" danger label=${t('users.delete')}
            question=${t('users.delete_question', { name: user.name })} onConfirm=${remove} /></span>
        </div>`}
      <${ErrorNote} error=${failure} />
    </section>
  `;
}

function GrantsSection({ user, onChanged, setNotice }) {
  const apps = useLoad(() => visibleApps(), []);
  const [app, setApp] = useState('');
  const [access, setAccess] = useState('VIEW');
  const [errors, setErrors] = useState({});
  const [failure, setFailure] = useState(null);
  const [saving, setSaving] = useState(false);
  const names = (apps.value ?? []).map((one) => one.name);
  const current = user.grants.find((grant) => grant.app === app);

  const grant = async (event) => {
    event.preventDefault();
    setFailure(null);
    if (!app) {
      setErrors({ app: t('users.pick_app_first') });
      return;
    }
    setErrors({});
    setSaving(true);
    try {
      await put(`${userPath(user.name)}/grants/${encodeURIComponent(app)}`, { access });
      setNotice(t('users.granted', { name: user.name, app, access: label('access', access) }));
      onChanged();
    } catch (error) {
      if (error.status === 404 && /app/.test(error.message ?? '')) setErrors({ app: error.message });
      else setFailure(error);
    } finally {
      setSaving(false);
    }
  };

  const takeBack = async (target) => {
    setFailure(null);
    try {
      await del(`${userPath(user.name)}/grants/${encodeURIComponent(target)}`);
      setNotice(t('users.grant_taken', { name: user.name, app: target }));
      onChanged();
    } catch (error) {
      setFailure(error);
    }
  };

  return html`
    <section aria-labelledby="grants-title">
      <h3 id="grants-title">${t('users.grants')}</h3>
      ${user.role === 'ADMIN' && html`<p class="muted">${t('users.admin_needs_no_grants')}</p>`}
      ${user.grants.length > 0 && html`
        <div class="table-wrap">
          <table class="list" id="grants-table">
            <thead><tr><th>${t('users.app')}</th><th>${t('users.access')}</th><th>${t('common.actions')}</th></tr></thead>
            <tbody>${user.grants.map((one) => html`
              <tr data-app=${one.app} key=${one.app}>
                <td><code>${one.app}</code></td>
                <td>${label('access', one.access)}</td>
                <td class="actions"><span data-action="revoke-grant">
                  <${ConfirmButton} danger label=${t('users.take_back')}
                    question=${t('users.take_back_question', { name: user.name, app: one.app })}
                    onConfirm=${() => takeBack(one.app)} /></span></td>
              </tr>`)}</tbody>
          </table>
        </div>`}
      <form class="filters" id="grant-form" onSubmit=${grant} novalidate>
        <${Field} id="grant-app" label=${t('users.app')} error=${errors.app}>${(d) => html`
          <${Select} id="grant-app" describedBy=${d} value=${app} empty=${t('users.pick_app')} values=${names}
            onChange=${setApp} />`}<//>
        <${Field} id="grant-access" label=${t('users.access')} hint=${t('users.access_hint')}>${(d) => html`
          <${Select} id="grant-access" describedBy=${d} value=${access} values=${ACCESS} kind="access" onChange=${setAccess} />`}<//>
        <button type="submit" id="grant-save" data-action="grant" disabled=${saving}>
          ${current ? t('users.change_grant') : t('users.grant')}</button>
      </form>
      ${apps.error && html`<${ErrorNote} error=${apps.error} />`}
      <${ErrorNote} error=${failure} />
    </section>
  `;
}

function PasswordSection({ user, setNotice }) {
  const own = user.name === currentUser()?.name;
  const [form, setForm] = useState({ password: '', repeat: '', current: '' });
  const [errors, setErrors] = useState({});
  const [failure, setFailure] = useState(null);
  const [saving, setSaving] = useState(false);
  const set = (name) => (event) => {
    const { value } = event.target;
    setForm((previous) => ({ ...previous, [name]: value }));
  };

  const submit = async (event) => {
    event.preventDefault();
    setFailure(null);
    const found = {};
    if (form.password.length < MIN_PASSWORD) found.password = t('users.password_short', { min: MIN_PASSWORD });
    else if (form.password !== form.repeat) found.repeat = t('users.password_mismatch');
    if (own && !form.current) found.current = t('users.current_needed');
    setErrors(found);
    if (Object.keys(found).length) return;
    setSaving(true);
    try {
      const body = own ? { password: form.password, current_password: form.current } : { password: form.password };
      await put(`${userPath(user.name)}/password`, body);
      setForm({ password: '', repeat: '', current: '' });
      setNotice(t('users.password_set', { name: user.name }));
    } catch (error) {
      const message = error.message ?? '';
      if (error.status === 403 && /current_password/.test(message)) setErrors({ current: message });
      else if (error.status === 400 && /password/.test(message)) setErrors({ password: message });
      else setFailure(error);
    } finally {
      setSaving(false);
    }
  };

  return html`
    <section aria-labelledby="password-title">
      <h3 id="password-title">${t('users.set_password')}</h3>
      <p class="muted">${own ? t('users.password_note_own') : t('users.password_note')}</p>
      <form class="filters" id="password-form" onSubmit=${submit} novalidate>
        <input type="text" class="visually-hidden" autocomplete="username" value=${user.name} readonly tabindex="-1"
          aria-hidden="true" />
        ${own && html`
          <${Field} id="password-current" label=${t('users.current_password')} error=${errors.current}>${(d) => html`
            <input id="password-current" type="password" autocomplete="current-password" aria-describedby=${d}
              value=${form.current} onInput=${set('current')} />`}<//>`}
        <${Field} id="password-new" label=${t('users.new_password')} hint=${t('users.password_hint', { min: MIN_PASSWORD })}
          error=${errors.password}>${(d) => html`
          <input id="password-new" type="password" autocomplete="new-password" minlength=${MIN_PASSWORD}
            aria-describedby=${d} value=${form.password} onInput=${set('password')} />`}<//>
        <${Field} id="password-repeat" label=${t('users.repeat_password')} error=${errors.repeat}>${(d) => html`
          <input id="password-repeat" type="password" autocomplete="new-password" aria-describedby=${d}
            value=${form.repeat} onInput=${set('repeat')} />`}<//>
        <button type="submit" id="password-save" data-action="set-password" disabled=${saving}>${t('users.set_password')}</button>
      </form>
      <${ErrorNote} error=${failure} />
    </section>
  `;
}

function TokensSection({ user, setNotice }) {
  const tokens = useLoad(() => get(`${userPath(user.name)}/tokens`).then(newestFirst), [user.name]);
  const shown = useShown(tokens, 20);
  const [failure, setFailure] = useState(null);
  const revoke = async (token) => {
    setFailure(null);
    try {
      await del(`${userPath(user.name)}/tokens/${token.id}`);
      setNotice(t('tokens.revoked', { id: token.id }));
      tokens.reload();
    } catch (error) {
      setFailure(error);
    }
  };
  return html`
    <section aria-labelledby="user-tokens-title">
      <h3 id="user-tokens-title">${t('users.tokens')}</h3>
      <${ErrorNote} error=${failure} />
      <${TokenTable} id="user-tokens-table" tokens=${shown.items} onRevoke=${revoke} />
      <${PagedFooter} paged=${shown} />
    </section>
  `;
}
